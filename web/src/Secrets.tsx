// An agent's secrets, on its settings: values Corral's egress proxy adds as
// a header to the requests its runs make to one host (a private registry's
// token), so the run never holds them. Anyone who sees the agent sees the
// list (name, host, header: never a value); editors and the owner add and
// delete. The value goes up once, in a password field, and this page
// forgets it as soon as it is sent, whether the server took it or not.

import { useState, type FormEvent } from 'react'
import { api } from './api'
import { ConfirmDelete } from './ConfirmDelete'
import type { AgentSecret } from './egress'
import { ErrorText, Loading, useLoad } from './feedback'
import { Field } from './Field'
import { formatTime } from './format'
import type { Agent } from './types'

function AddSecret({ agent, onAdded }: { agent: Agent; onAdded: (s: AgentSecret) => void }) {
  const [name, setName] = useState('')
  const [host, setHost] = useState('')
  const [header, setHeader] = useState('Authorization')
  const [value, setValue] = useState('')
  const [error, setError] = useState<unknown>()
  const [busy, setBusy] = useState(false)

  async function submit(e: FormEvent) {
    e.preventDefault()
    setBusy(true)
    setError(undefined)
    const sent = value
    // Forget the value before the answer: a refusal must not leave it on the page either.
    setValue('')
    try {
      const s = await api.createSecret(agent.id, { name: name.trim(), host: host.trim(), header: header.trim(), value: sent })
      setName('')
      setHost('')
      setHeader('Authorization')
      onAdded(s)
    } catch (err) {
      setError(err)
    } finally {
      setBusy(false)
    }
  }

  return (
    <form onSubmit={submit} className="stack" aria-labelledby="add-secret-heading" autoComplete="off">
      <h3 id="add-secret-heading">Add a secret</h3>
      <div className="grid">
        <Field label="Name" hint="For people, to tell secrets apart.">
          {(p) => <input {...p} required value={name} onChange={(e) => setName(e.target.value)} />}
        </Field>
        <Field label="Host" hint="The host whose requests carry it, such as npm.example.com.">
          {(p) => <input {...p} required value={host} onChange={(e) => setHost(e.target.value)} />}
        </Field>
        <Field label="Header">
          {(p) => <input {...p} required value={header} onChange={(e) => setHeader(e.target.value)} />}
        </Field>
        <Field label="Value" hint="The header’s whole value, such as “Bearer ” and the token. Never shown again.">
          {(p) => <input {...p} type="password" required autoComplete="new-password" value={value} onChange={(e) => setValue(e.target.value)} />}
        </Field>
      </div>
      <ErrorText error={error} />
      <div>
        <button type="submit" disabled={busy}>
          Add secret
        </button>
      </div>
    </form>
  )
}

export function SecretsSection({ agent }: { agent: Agent }) {
  const secrets = useLoad(() => api.secrets(agent.id), [agent.id])
  const [added, setAdded] = useState<AgentSecret>()
  const editable = agent.can.includes('edit_agent')
  const list = secrets.data
  return (
    <section className="stack secrets" aria-labelledby="secrets-heading">
      <h2 id="secrets-heading">Secrets</h2>
      <p className="muted">
        Corral’s egress proxy adds each secret as a header to the requests {agent.name}’s runs make to its host, which must be on the
        allow-list; the runs never see its value, and nobody can read it back.
      </p>
      <ErrorText error={secrets.error} />
      {secrets.loading && !list && <Loading what="the secrets" />}
      {list && list.length === 0 && <p className="empty">No secrets.</p>}
      {list && list.length > 0 && (
        <table className="list" aria-label="Secrets">
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Host</th>
              <th scope="col">Header</th>
              <th scope="col">Added</th>
              {editable && <th scope="col">Actions</th>}
            </tr>
          </thead>
          <tbody>
            {list.map((s) => (
              <tr key={s.id}>
                <th scope="row">{s.name}</th>
                <td>{s.host}</td>
                <td>
                  <code>{s.header}</code>
                </td>
                <td>{formatTime(s.created_at)}</td>
                {editable && (
                  <td>
                    <ConfirmDelete
                      name={`secret ${s.name}`}
                      question={`Delete ${s.name}? Requests to ${s.host} go without it.`}
                      remove={() => api.deleteSecret(agent.id, s.id)}
                      onDeleted={() => void secrets.reload()}
                    />
                  </td>
                )}
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {added && (
        <p role="status" className="ok">
          Added {added.name}. Its value is stored and will not be shown again.
        </p>
      )}
      {editable ? (
        <AddSecret
          agent={agent}
          onAdded={(s) => {
            setAdded(s)
            void secrets.reload()
          }}
        />
      ) : (
        <p className="muted">An editor or the owner adds and deletes secrets.</p>
      )}
    </section>
  )
}
