// The caller's code-host credentials: what a clone of a private repository
// and a push use. The secret goes up once, in a password field, and is
// never shown again: the server never answers it, and this page forgets it
// as soon as it is sent, whether the server took it or not.

import { useEffect, useState, type FormEvent } from 'react'
import { api } from '../api'
import { ErrorText, Loading, useLoad } from '../feedback'
import { Field } from '../Field'
import { formatTime } from '../format'
import type { Credential } from '../types'

function DeleteCredential({ cred, onDeleted }: { cred: Credential; onDeleted: () => void }) {
  const [confirming, setConfirming] = useState(false)
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState<unknown>()
  async function remove() {
    setBusy(true)
    setError(undefined)
    try {
      await api.deleteCredential(cred.id)
      onDeleted()
    } catch (err) {
      setError(err)
      setBusy(false)
    }
  }
  if (!confirming) {
    return (
      <button type="button" className="secondary small" aria-label={`Delete credential ${cred.name}`} onClick={() => setConfirming(true)}>
        Delete
      </button>
    )
  }
  return (
    <div className="confirm" role="group" aria-label={`Confirm deleting credential ${cred.name}`}>
      <span>Delete {cred.name}? Pushes and clones that use it will fail.</span>{' '}
      <button type="button" className="danger small" onClick={remove} disabled={busy}>
        Yes, delete
      </button>{' '}
      <button type="button" className="secondary small" onClick={() => setConfirming(false)}>
        Cancel
      </button>
      <ErrorText error={error} />
    </div>
  )
}

function AddCredential({ onAdded }: { onAdded: (c: Credential) => void }) {
  const [name, setName] = useState('')
  const [host, setHost] = useState('')
  const [username, setUsername] = useState('')
  const [secret, setSecret] = useState('')
  const [error, setError] = useState<unknown>()
  const [busy, setBusy] = useState(false)

  async function submit(e: FormEvent) {
    e.preventDefault()
    setBusy(true)
    setError(undefined)
    const sent = secret
    // Forget the secret before the answer: a refusal must not leave it on the page either.
    setSecret('')
    try {
      const c = await api.createCredential({ name: name.trim(), host: host.trim(), username: username.trim(), secret: sent })
      setName('')
      setHost('')
      setUsername('')
      onAdded(c)
    } catch (err) {
      setError(err)
    } finally {
      setBusy(false)
    }
  }

  return (
    <form onSubmit={submit} className="stack" aria-labelledby="add-credential-heading" autoComplete="off">
      <h2 id="add-credential-heading">Add a credential</h2>
      <div className="grid">
        <Field label="Name" hint="For you, to tell credentials apart.">
          {(p) => <input {...p} required value={name} onChange={(e) => setName(e.target.value)} />}
        </Field>
        <Field label="Host" hint="The code host, such as git.example.com.">
          {(p) => <input {...p} required value={host} onChange={(e) => setHost(e.target.value)} />}
        </Field>
        <Field label="Username">
          {(p) => <input {...p} required autoComplete="off" value={username} onChange={(e) => setUsername(e.target.value)} />}
        </Field>
        <Field label="Secret" hint="A token or password. Stored encrypted; never shown again.">
          {(p) => <input {...p} type="password" required autoComplete="new-password" value={secret} onChange={(e) => setSecret(e.target.value)} />}
        </Field>
      </div>
      <ErrorText error={error} />
      <div>
        <button type="submit" disabled={busy}>
          Add credential
        </button>
      </div>
    </form>
  )
}

export function CredentialsPage() {
  const creds = useLoad(() => api.credentials(), [])
  const [added, setAdded] = useState<Credential>()
  useEffect(() => {
    document.title = 'Credentials · Corral'
  }, [])
  return (
    <section>
      <h1>Credentials</h1>
      <p className="muted">
        Your code-host credentials. A clone uses the one you pick; a push of an agent you own uses yours. Agents never see them.
      </p>
      <ErrorText error={creds.error} />
      {creds.loading && !creds.data && <Loading what="your credentials" />}
      {creds.data && creds.data.length === 0 && <p className="empty">No credentials yet.</p>}
      {creds.data && creds.data.length > 0 && (
        <table className="list" aria-label="Your credentials">
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Host</th>
              <th scope="col">Username</th>
              <th scope="col">Added</th>
              <th scope="col">Actions</th>
            </tr>
          </thead>
          <tbody>
            {creds.data.map((c) => (
              <tr key={c.id}>
                <th scope="row">{c.name}</th>
                <td>{c.host}</td>
                <td>{c.username}</td>
                <td>{formatTime(c.created_at)}</td>
                <td>
                  <DeleteCredential cred={c} onDeleted={() => void creds.reload()} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {added && (
        <p role="status" className="ok">
          Added {added.name}. Its secret is stored and will not be shown again.
        </p>
      )}
      <AddCredential
        onAdded={(c) => {
          setAdded(c)
          void creds.reload()
        }}
      />
    </section>
  )
}
