// One change set: every entry with its class, state and diff, and (for
// editors and owners) decisions while it is pending: tick entries and
// approve or reject just those, or decide every pending entry at once.

import { useEffect, useState } from 'react'
import { api } from '../api'
import { Badge, ClassBadge, StatusBadge } from '../badges'
import { keepDiffs, selectable, tickedPaths } from '../changes'
import { isNotFound } from '../errors'
import { ErrorText, Loading, NoAccess, useLoad } from '../feedback'
import { DiffView } from '../DiffView'
import { formatBytes, formatTime, shortId } from '../format'
import { shownName } from '../names'
import { inboxStale } from '../review'
import { Link } from '../router'
import type { ChangeEntry, ChangeSet } from '../types'

export function ChangePage({ id }: { id: string }) {
  const cs = useLoad(() => api.change(id), [id])
  const agentId = cs.data?.agent_id
  const agent = useLoad(() => (agentId ? api.agent(agentId) : Promise.resolve(undefined)), [agentId])
  const [error, setError] = useState<unknown>()
  const [busy, setBusy] = useState(false)
  const [ticked, setTicked] = useState<ReadonlySet<string>>(new Set())
  useEffect(() => {
    document.title = `Change set ${shortId(id)} · Corral`
  }, [id])

  if (isNotFound(cs.error) || isNotFound(agent.error)) {
    return <NoAccess text="This change set does not exist or you no longer have access to its agent." />
  }
  if (!cs.data) return cs.error ? <ErrorText error={cs.error} /> : <Loading what="the change set" />
  const c = cs.data
  const a = agent.data
  const decidable = !!a && a.can.includes('decide_changes') && c.status === 'pending'
  const open = c.entries.filter(selectable)
  const chosen = tickedPaths(c, ticked)

  function toggle(path: string, on: boolean) {
    setTicked((prev) => {
      const next = new Set(prev)
      if (on) next.add(path)
      else next.delete(path)
      return next
    })
  }

  /** Decides the entries named by paths, or every pending one without. */
  async function decide(approve: boolean, paths?: string[]) {
    setError(undefined)
    setBusy(true)
    const before = c
    try {
      const next = approve ? await api.approve(id, paths) : await api.reject(id, paths)
      cs.setData(keepDiffs(next, before))
      setTicked(new Set())
      inboxStale()
    } catch (err) {
      setError(err)
      await cs.reload() // a conflict marks the entries that moved `conflicted`
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
        <div className="decide">
          {open.length > 0 && (
            <div className="row" role="group" aria-label="Decide the ticked entries">
              <button type="button" className="secondary" onClick={() => setTicked(new Set(open.map((e) => e.path)))} disabled={busy}>
                Select all
              </button>
              <button type="button" className="secondary" onClick={() => setTicked(new Set())} disabled={busy}>
                Select none
              </button>
              <button type="button" onClick={() => decide(true, chosen)} disabled={busy || chosen.length === 0}>
                Approve selected ({chosen.length})
              </button>
              <button type="button" className="secondary" onClick={() => decide(false, chosen)} disabled={busy || chosen.length === 0}>
                Reject selected ({chosen.length})
              </button>
            </div>
          )}
          <div className="row" role="group" aria-label="Decide every pending entry">
            <button type="button" onClick={() => decide(true)} disabled={busy}>
              Approve
            </button>
            <button type="button" className="secondary" onClick={() => decide(false)} disabled={busy}>
              Reject
            </button>
            <span className="hint">
              Approve and Reject decide every pending entry that is not protected. Approving is all or nothing, for the
              ticked entries too.
            </span>
          </div>
        </div>
      )}
      {c.status === 'pending' && a && !a.can.includes('decide_changes') && (
        <p className="muted">An editor or the owner decides this change set.</p>
      )}
      <ErrorText error={error} />
      <h2>Files</h2>
      {c.entries.length === 0 && <p className="empty">No files changed.</p>}
      {c.entries.map((e) => (
        <Entry
          key={e.path}
          entry={e}
          tick={decidable && selectable(e) ? { checked: ticked.has(e.path), disabled: busy, onChange: (on) => toggle(e.path, on) } : undefined}
        />
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

const flagsLead: Record<ChangeEntry['class'], string> = {
  protected: 'Protected because',
  risky: 'Risky because',
  ordinary: 'Flags',
}

interface Tick {
  checked: boolean
  disabled: boolean
  onChange: (on: boolean) => void
}

function Entry({ entry: e, tick }: { entry: ChangeEntry; tick?: Tick }) {
  const name = shownName(e)
  return (
    <section className="entry" aria-label={name.text}>
      <div className="entry-head">
        {tick && (
          <input
            type="checkbox"
            className="tick"
            aria-label={name.text}
            checked={tick.checked}
            disabled={tick.disabled}
            onChange={(ev) => tick.onChange(ev.target.checked)}
          />
        )}
        <h3>
          <code className={name.unusual ? 'name-unusual' : undefined}>{name.text}</code>
        </h3>
        {name.unusual && (
          <span className="badge badge-name" title="The name holds characters that do not print as themselves; it is shown escaped.">
            unusual name
          </span>
        )}
        <span className="muted">{opWords[e.op] ?? e.op}</span>
        <ClassBadge cls={e.class} />
        <Badge kind="status" value={e.state} label="State" />
        <span className="muted small">
          {e.op !== 'delete' && formatBytes(e.size)}
          {e.mode && `${e.op !== 'delete' ? ' · ' : ''}${e.mode}`}
        </span>
      </div>
      {e.flags && e.flags.length > 0 && (
        <p className="muted small">
          {flagsLead[e.class] ?? 'Flags'}: {e.flags.join(', ')}
        </p>
      )}
      {e.note && <p className="note small">{e.note}</p>}
      {e.diff !== undefined ? (
        <DiffView diff={e.diff} label={`Diff of ${name.text}`} />
      ) : (
        <p className="muted small">
          No diff shown{e.class === 'protected' ? ' (protected)' : ''}. Old {e.old_sha256 ? e.old_sha256.slice(0, 12) : '—'}, new{' '}
          {e.new_sha256 ? e.new_sha256.slice(0, 12) : '—'} (SHA-256).
        </p>
      )}
    </section>
  )
}
