// Logging in and signing up.

import { useEffect, useState, type FormEvent } from 'react'
import { api } from '../api'
import { ErrorText } from '../feedback'
import { Field } from '../Field'
import { Link, navigate, useLocation } from '../router'
import { safeNext, useSession } from '../session'

export function LoginPage() {
  const { setUser } = useSession()
  const { query } = useLocation()
  const next = query.get('next')
  const [email, setEmail] = useState('')
  const [password, setPassword] = useState('')
  const [error, setError] = useState<unknown>()
  const [busy, setBusy] = useState(false)
  useEffect(() => {
    document.title = 'Log in · Corral'
  }, [])

  async function submit(e: FormEvent) {
    e.preventDefault()
    setBusy(true)
    setError(undefined)
    try {
      const user = await api.login(email, password)
      setUser(user)
      navigate(safeNext(next), { replace: true })
    } catch (err) {
      setError(err)
    } finally {
      setBusy(false)
    }
  }

  return (
    <section className="auth">
      <h1>Log in</h1>
      <form onSubmit={submit} className="stack">
        <Field label="Email">
          {(p) => <input {...p} type="email" autoComplete="username" required value={email} onChange={(e) => setEmail(e.target.value)} />}
        </Field>
        <Field label="Password">
          {(p) => (
            <input
              {...p}
              type="password"
              autoComplete="current-password"
              required
              value={password}
              onChange={(e) => setPassword(e.target.value)}
            />
          )}
        </Field>
        <ErrorText error={error} />
        <div>
          <button type="submit" disabled={busy}>
            Log in
          </button>
        </div>
      </form>
      <p>
        No account yet? <Link to={next ? `/signup?next=${encodeURIComponent(next)}` : '/signup'}>Create one</Link>
      </p>
    </section>
  )
}

export function SignupPage() {
  const { setUser } = useSession()
  const { query } = useLocation()
  const next = query.get('next')
  const [email, setEmail] = useState('')
  const [name, setName] = useState('')
  const [password, setPassword] = useState('')
  const [error, setError] = useState<unknown>()
  const [busy, setBusy] = useState(false)
  useEffect(() => {
    document.title = 'Sign up · Corral'
  }, [])

  async function submit(e: FormEvent) {
    e.preventDefault()
    setBusy(true)
    setError(undefined)
    try {
      const user = await api.signup(email, name, password)
      setUser(user)
      navigate(safeNext(next), { replace: true })
    } catch (err) {
      setError(err)
    } finally {
      setBusy(false)
    }
  }

  return (
    <section className="auth">
      <h1>Sign up</h1>
      <form onSubmit={submit} className="stack">
        <Field label="Email">
          {(p) => <input {...p} type="email" autoComplete="email" required value={email} onChange={(e) => setEmail(e.target.value)} />}
        </Field>
        <Field label="Name">
          {(p) => <input {...p} autoComplete="name" required maxLength={100} value={name} onChange={(e) => setName(e.target.value)} />}
        </Field>
        <Field label="Password" hint="At least 8 characters.">
          {(p) => (
            <input
              {...p}
              type="password"
              autoComplete="new-password"
              required
              minLength={8}
              value={password}
              onChange={(e) => setPassword(e.target.value)}
            />
          )}
        </Field>
        <ErrorText error={error} />
        <div>
          <button type="submit" disabled={busy}>
            Sign up
          </button>
        </div>
      </form>
      <p>
        Already have an account? <Link to={next ? `/login?next=${encodeURIComponent(next)}` : '/login'}>Log in</Link>
      </p>
    </section>
  )
}
