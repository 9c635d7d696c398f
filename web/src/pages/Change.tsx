// One change set: every entry with its class and diff, and (for editors
// and owners) Approve and Reject while it is pending.

import { useEffect, useState } from 'react'
import { api } from '../api'
import { ClassBadge, StatusBadge } from '../badges'
import { isNotFound } from '../errors'
import { ErrorText, Loading, NoAccess, useLoad } from '../feedback'
import { DiffView } from '../DiffView'
import { formatBytes, formatTime, shortId } from '../format'
import { can } from '../permissions'
import { Link } from '../router'
import type { ChangeEntry, ChangeSet } from '../types'

export function ChangePage({ id }: { id: string }) {
  const cs = useLoad(() => api.change(id), [id])
  const agentId = cs.data?.agent_id
  const agent = useLoad(() => (agentId ? api.agent(agentId) : Promise.resolve(undefined)), [agentId])
  const [error, setError] = useState<unknown>()
  const [busy, setBusy] = useState(false)
  useEffect(() => {
    document.title = `Change set ${shortId(id)} · Corral`
  }, [id])

  if (isNotFound(cs.error) || isNotFound(agent.error)) {
    return <NoAccess text="This change set does not exist or you no longer have access to its agent." />
  }
  if (!cs.data) return cs.error ? <ErrorText error={cs.error} /> : <Loading what="the change set" />
  const c = cs.data
  const a = agent.data
  const decidable = !!a && can(a.access, 'decideChanges') && c.status === 'pending'

  async function decide(approve: boolean) {
    setError(undefined)
    setBusy(true)
    try {
      cs.setData(approve ? await api.approve(id) : await api.reject(id))
    } catch (err) {
      setError(err)
      await cs.reload() // a conflict leaves it `conflicted`
    } finally {
      setBusy(false)
    }
  }

  return (
    <section>
      <p className="crumbs">
        <Link to="/">Agents</Link> / {a ? <Link to={`/agents/${encodeURIComponent(a.id)}?tab=changes`}>{a.name}</Link> : '…'} /
        change set
      </p>
      <div className="page-head">
        <h1>Change set {shortId(c.id)}</h1>
        <p aria-live="polite">
          Status: <StatusBadge status={c.status} />
        </p>
      </div>
      <Summary cs={c} />
      {decidable && (
        <div className="decide row">
          <button type="button" onClick={() => decide(true)} disabled={busy}>
            Approve
          </button>
          <button type="button" className="secondary" onClick={() => decide(false)} disabled={busy}>
            Reject
          </button>
          <span className="hint">Approving applies every entry that is not protected, all or nothing.</span>
        </div>
      )}
      {c.status === 'pending' && a && !can(a.access, 'decideChanges') && (
        <p className="muted">An editor or the owner decides this change set.</p>
      )}
      <ErrorText error={error} />
      <h2>Files</h2>
      {c.entries.length === 0 && <p className="empty">No files changed.</p>}
      {c.entries.map((e) => (
        <Entry key={e.path} entry={e} />
      ))}
    </section>
  )
}

function Summary({ cs }: { cs: ChangeSet }) {
  return (
    <dl className="facts">
      <div className="fact">
        <dt>Mode</dt>
        <dd>{cs.mode}</dd>
      </div>
      <div className="fact">
        <dt>Run</dt>
        <dd>{cs.run_id ? <Link to={`/runs/${encodeURIComponent(cs.run_id)}`}>run {shortId(cs.run_id)}</Link> : '—'}</dd>
      </div>
      <div className="fact">
        <dt>Created</dt>
        <dd>{formatTime(cs.created_at)}</dd>
      </div>
      {cs.status === 'pending' && (
        <div className="fact">
          <dt>Expires</dt>
          <dd>{formatTime(cs.expires_at)}</dd>
        </div>
      )}
      {cs.decided_by && (
        <div className="fact">
          <dt>Decided by</dt>
          <dd>
            {cs.decided_by.name}, {formatTime(cs.decided_at)}
          </dd>
        </div>
      )}
    </dl>
  )
}

const opWords: Record<ChangeEntry['op'], string> = { create: 'created', modify: 'modified', delete: 'deleted' }

function Entry({ entry: e }: { entry: ChangeEntry }) {
  return (
    <section className="entry" aria-label={e.path}>
      <div className="entry-head">
        <h3>
          <code>{e.path}</code>
        </h3>
        <span className="muted">{opWords[e.op] ?? e.op}</span>
        <ClassBadge cls={e.class} />
        <span className="muted small">
          {e.state}
          {e.op !== 'delete' && ` · ${formatBytes(e.size)}`}
          {e.mode && ` · ${e.mode}`}
        </span>
      </div>
      {e.flags && e.flags.length > 0 && <p className="muted small">Protected because: {e.flags.join(', ')}</p>}
      {e.diff !== undefined ? (
        <DiffView diff={e.diff} label={`Diff of ${e.path}`} />
      ) : (
        <p className="muted small">
          No diff shown{e.class === 'protected' ? ' (protected)' : ''}. Old {e.old_sha256 ? e.old_sha256.slice(0, 12) : '—'}, new{' '}
          {e.new_sha256 ? e.new_sha256.slice(0, 12) : '—'} (SHA-256).
        </p>
      )}
    </section>
  )
}
