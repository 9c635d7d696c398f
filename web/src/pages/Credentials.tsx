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

/** One repository per line, blank lines dropped. */
function lines(text: string): string[] {
  return text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '')
}

const repositoriesHint =
  'One per line: the repositories it may be used for, such as git.example.com/team/app or git.example.com/team/*. It is used for no other, by anyone.'

function EditRepositories({ cred, onSaved }: { cred: Credential; onSaved: () => void }) {
  const [editing, setEditing] = useState(false)
  const [text, setText] = useState(cred.repositories.join('\n'))
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState<unknown>()
  async function save(e: FormEvent) {
    e.preventDefault()
    setBusy(true)
    setError(undefined)
    try {
      await api.setCredentialRepositories(cred.id, lines(text))
      setEditing(false)
      onSaved()
    } catch (err) {
      setError(err)
    } finally {
      setBusy(false)
    }
  }
  if (!editing) {
    return (
      <button type="button" className="secondary small" aria-label={`Edit repositories of ${cred.name}`} onClick={() => setEditing(true)}>
        Edit repositories
      </button>
    )
  }
  return (
    <form onSubmit={save} className="stack" aria-label={`Edit the repositories of ${cred.name}`}>
      <Field label={`Repositories of ${cred.name}`} hint={repositoriesHint}>
        {(p) => <textarea {...p} rows={3} value={text} onChange={(e) => setText(e.target.value)} />}
      </Field>
      <ErrorText error={error} />
      <div>
        <button type="submit" className="small" disabled={busy}>
          Save
        </button>{' '}
        <button type="button" className="secondary small" onClick={() => setEditing(false)}>
          Cancel
        </button>
      </div>
    </form>
  )
}

function AddCredential({ onAdded }: { onAdded: (c: Credential) => void }) {
  const [name, setName] = useState('')
  const [host, setHost] = useState('')
  const [username, setUsername] = useState('')
  const [secret, setSecret] = useState('')
  const [repositories, setRepositories] = useState('')
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
      const c = await api.createCredential({
        name: name.trim(),
        host: host.trim(),
        username: username.trim(),
        secret: sent,
        repositories: lines(repositories),
      })
      setName('')
      setHost('')
      setUsername('')
      setRepositories('')
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
      <Field label="Repositories" hint={repositoriesHint}>
        {(p) => <textarea {...p} required rows={3} value={repositories} onChange={(e) => setRepositories(e.target.value)} />}
      </Field>
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
        Your code-host credentials. A clone uses the one you pick, and only for the repositories it names; pushes go to that repository
        alone. Agents never see them.
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
              <th scope="col">Repositories</th>
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
                <td>
                  {c.repositories.length === 0 ? <span className="muted">none: used for nothing</span> : c.repositories.join(', ')}
                </td>
                <td>{formatTime(c.created_at)}</td>
                <td>
                  <EditRepositories cred={c} onSaved={() => void creds.reload()} />{' '}
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
