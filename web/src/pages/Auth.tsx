// Logging in and signing up; on a brand-new server (no account yet, as
// GET /api/setup says), both become the first-run screen: create the admin
// account.

import { useEffect, useState, type FormEvent, type ReactNode } from 'react'
import { api } from '../api'
import { ErrorText, Loading, useLoad } from '../feedback'
import { Field } from '../Field'
import { Link, navigate, useLocation } from '../router'
import { safeNext, useSession } from '../session'
import type { Setup } from '../types'

/** The server's setup; while it loads, undefined; when it cannot be had, null (the ordinary pages). */
function useSetup(): Setup | null | undefined {
  const setup = useLoad(() => api.setup(), [])
  if (setup.error !== undefined) return null
  return setup.data
}

/** What a brand-new server whose signup is not open tells its first visitor. */
function FirstRunNotice({ signup }: { signup: Setup['signup'] }) {
  return (
    <div className="banner warn" role="note">
      <p>
        No account exists on this server yet, and signup is {signup === 'invite' ? 'by invite only' : 'closed'}. Create the admin account
        on the server: <code>corral user create --email you@example.com --name "Your name"</code> (it reads the password from standard
        input); the first account administers the server.
      </p>
    </div>
  )
}

export function LoginPage() {
  const setup = useSetup()
  if (setup === undefined) return <Loading what="the sign-in page" />
  if (setup?.first_run && setup.signup === 'open') return <FirstRunPage />
  return <LoginForm firstRun={setup?.first_run ? setup.signup : undefined} />
}

function LoginForm({ firstRun }: { firstRun?: Setup['signup'] }) {
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
      {firstRun && <FirstRunNotice signup={firstRun} />}
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
  const setup = useSetup()
  if (setup === undefined) return <Loading what="the sign-up page" />
  if (setup?.first_run && setup.signup === 'open') return <FirstRunPage />
  return <SignupForm />
}

/** The first-run screen: the first account made administers the server. */
function FirstRunPage() {
  return (
    <SignupForm
      title="Create the admin account"
      intro={
        <div className="banner good first-run" role="note">
          <p>
            <strong>You are the first person here.</strong> This account administers the server: it lists and disables accounts and
            invites people. Everyone after you signs up as an ordinary user.
          </p>
        </div>
      }
      button="Create the admin account"
      withLogin={false}
    />
  )
}

function SignupForm({
  title = 'Sign up',
  intro,
  button = 'Sign up',
  withLogin = true,
}: {
  title?: string
  intro?: ReactNode
  button?: string
  withLogin?: boolean
}) {
  const { setUser } = useSession()
  const { query } = useLocation()
  const next = query.get('next')
  // An invite link: /signup?invite=TOKEN (the admin page makes them).
  const invite = query.get('invite') ?? undefined
  const [email, setEmail] = useState('')
  const [name, setName] = useState('')
  const [password, setPassword] = useState('')
  const [error, setError] = useState<unknown>()
  const [busy, setBusy] = useState(false)
  useEffect(() => {
    document.title = `${title} · Corral`
  }, [title])

  async function submit(e: FormEvent) {
    e.preventDefault()
    setBusy(true)
    setError(undefined)
    try {
      const user = await api.signup(email, name, password, invite)
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
      <h1>{title}</h1>
      {intro}
      {invite && <p className="muted">You were invited: this account is made with your invite.</p>}
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
            {button}
          </button>
        </div>
      </form>
      {withLogin && (
        <p>
          Already have an account? <Link to={next ? `/login?next=${encodeURIComponent(next)}` : '/login'}>Log in</Link>
        </p>
      )}
    </section>
  )
}
