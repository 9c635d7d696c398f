// Sharing an agent (owner only): grants to people by email (each saying
// whether its grantee accepted the agent as a delegation target), and
// share links whose token is shown once.

import { useState, type FormEvent } from 'react'
import { api } from './api'
import { ErrorText, Loading, useLoad } from './feedback'
import { Field } from './Field'
import { formatTime } from './format'
import type { Agent, GrantLevel, Link as ShareLink, LinkLevel } from './types'

const grantLevels: GrantLevel[] = ['viewer', 'runner', 'editor']
const linkLevels: LinkLevel[] = ['viewer', 'runner']

const levelHelp: Record<GrantLevel, string> = {
  viewer: 'reads the conversation, runs and changes',
  runner: 'also sends messages and stops their own runs',
  editor: 'also changes settings, decides changes and kills runs',
}

export function SharingPanel({ agent }: { agent: Agent }) {
  return (
    <div className="sharing">
      <People agent={agent} />
      <Links agent={agent} />
    </div>
  )
}

function People({ agent }: { agent: Agent }) {
  const grants = useLoad(() => api.grants(agent.id), [agent.id])
  const [email, setEmail] = useState('')
  const [level, setLevel] = useState<GrantLevel>('viewer')
  const [error, setError] = useState<unknown>()
  const [busy, setBusy] = useState(false)

  async function act(fn: () => Promise<unknown>) {
    setError(undefined)
    setBusy(true)
    try {
      await fn()
      await grants.reload()
      return true
    } catch (err) {
      setError(err)
      return false
    } finally {
      setBusy(false)
    }
  }

  async function share(e: FormEvent) {
    e.preventDefault()
    if (await act(() => api.grantByEmail(agent.id, email.trim(), level))) setEmail('')
  }

  return (
    <section aria-labelledby="people-heading">
      <h2 id="people-heading">People</h2>
      <ErrorText error={grants.error} />
      {grants.loading && !grants.data && <Loading what="who has access" />}
      {grants.data && grants.data.length === 0 && <p className="empty">Not shared with anyone yet.</p>}
      {grants.data && grants.data.length > 0 && (
        <table className="list">
          <thead>
            <tr>
              <th scope="col">Person</th>
              <th scope="col">Email</th>
              <th scope="col">Access</th>
              <th scope="col">Since</th>
              <th scope="col">Delegation target</th>
              <th scope="col">
                <span className="visually-hidden">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {grants.data.map((g) => (
              <tr key={g.user.id}>
                <th scope="row">{g.user.name}</th>
                <td>{g.user.email}</td>
                <td>
                  <select
                    aria-label={`Access for ${g.user.email}`}
                    value={g.level}
                    disabled={busy}
                    onChange={(e) => void act(() => api.setGrant(agent.id, g.user.id, e.target.value as GrantLevel))}
                  >
                    {grantLevels.map((l) => (
                      <option key={l} value={l}>
                        {l}
                      </option>
                    ))}
                  </select>
                </td>
                <td>{formatTime(g.created_at)}</td>
                <td title="Whether their runs may hand work to this agent: they accept it themselves.">
                  {g.accepted ? 'accepted' : 'not accepted yet'}
                </td>
                <td>
                  <button type="button" className="secondary" disabled={busy} onClick={() => void act(() => api.revokeGrant(agent.id, g.user.id))}>
                    Revoke
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <form onSubmit={share} className="row share-form" aria-label="Share with a person">
        <Field label="Email">
          {(p) => <input {...p} type="email" required value={email} onChange={(e) => setEmail(e.target.value)} />}
        </Field>
        <Field label="Level">
          {(p) => (
            <select {...p} value={level} onChange={(e) => setLevel(e.target.value as GrantLevel)} aria-describedby="level-help">
              {grantLevels.map((l) => (
                <option key={l} value={l}>
                  {l}
                </option>
              ))}
            </select>
          )}
        </Field>
        <button type="submit" disabled={busy}>
          Share
        </button>
      </form>
      <p id="level-help" className="hint">
        {grantLevels.map((l) => `${l}: ${levelHelp[l]}`).join('; ')}. The person needs an account here.
      </p>
      <ErrorText error={error} />
    </section>
  )
}

function Links({ agent }: { agent: Agent }) {
  const links = useLoad(() => api.links(agent.id), [agent.id])
  const [level, setLevel] = useState<LinkLevel>('viewer')
  const [created, setCreated] = useState<ShareLink | null>(null)
  const [error, setError] = useState<unknown>()
  const [busy, setBusy] = useState(false)
  const [copied, setCopied] = useState(false)

  async function create(e: FormEvent) {
    e.preventDefault()
    setError(undefined)
    setBusy(true)
    setCopied(false)
    try {
      setCreated(await api.createLink(agent.id, level))
      await links.reload()
    } catch (err) {
      setError(err)
    } finally {
      setBusy(false)
    }
  }

  async function revoke(l: ShareLink) {
    setError(undefined)
    setBusy(true)
    try {
      await api.deleteLink(agent.id, l.id)
      if (created?.id === l.id) setCreated(null)
      await links.reload()
    } catch (err) {
      setError(err)
    } finally {
      setBusy(false)
    }
  }

  const url = created?.token ? `${window.location.origin}/links/${encodeURIComponent(created.token)}` : ''

  async function copy() {
    try {
      await navigator.clipboard.writeText(url)
      setCopied(true)
    } catch {
      setCopied(false)
    }
  }

  return (
    <section aria-labelledby="links-heading">
      <h2 id="links-heading">Share links</h2>
      <p className="muted">
        Whoever opens a link while signed in gains its access for as long as the link lives; revoking it ends their access.
      </p>
      <ErrorText error={links.error} />
      {links.data && links.data.length === 0 && <p className="empty">No share links.</p>}
      {links.data && links.data.length > 0 && (
        <table className="list">
          <thead>
            <tr>
              <th scope="col">Link</th>
              <th scope="col">Gives</th>
              <th scope="col">Created</th>
              <th scope="col">
                <span className="visually-hidden">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {links.data.map((l) => (
              <tr key={l.id}>
                <th scope="row">{l.id}</th>
                <td>{l.level}</td>
                <td>{formatTime(l.created_at)}</td>
                <td>
                  <button type="button" className="secondary" disabled={busy} onClick={() => void revoke(l)}>
                    Revoke
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <form onSubmit={create} className="row">
        <Field label="Access through the link">
          {(p) => (
            <select {...p} value={level} onChange={(e) => setLevel(e.target.value as LinkLevel)}>
              {linkLevels.map((l) => (
                <option key={l} value={l}>
                  {l}
                </option>
              ))}
            </select>
          )}
        </Field>
        <button type="submit" disabled={busy}>
          Create link
        </button>
      </form>
      {created && url && (
        <div className="banner good" aria-live="polite">
          <Field label={`New ${created.level} link (shown only this once: copy it now)`} className="grow">
            {(p) => <input {...p} readOnly value={url} onFocus={(e) => e.target.select()} />}
          </Field>
          <button type="button" className="secondary" onClick={copy}>
            {copied ? 'Copied' : 'Copy'}
          </button>
        </div>
      )}
      <ErrorText error={error} />
    </section>
  )
}
