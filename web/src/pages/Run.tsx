// One run: its kind, its fields, the run that delegated it and the runs it
// delegated to, and its trace as a timeline, followed live while it goes.

import { useCallback, useEffect, useReducer, useRef, useState } from 'react'
import { useAgentNames } from '../agentNames'
import { api } from '../api'
import { StatusBadge } from '../badges'
import { runKind } from '../drivers'
import { isNotFound } from '../errors'
import { ErrorText, Loading, NoAccess, useLoad } from '../feedback'
import { formatDuration, formatTime, shortId } from '../format'
import { isTerminal, summarize, type LiveState } from '../live'
import { Link } from '../router'
import { RunTree } from '../RunTree'
import { RunView } from '../RunView'
import { useSession } from '../session'
import { endWord } from '../terminal'
import type { TraceEvent } from '../types'

/** How often a going run's duration is redrawn. */
const tickMs = 1000

export function RunPage({ id }: { id: string }) {
  const { user } = useSession()
  const run = useLoad(() => api.run(id), [id])
  const agentId = run.data?.agent_id
  const agent = useLoad(() => (agentId ? api.agent(agentId) : Promise.resolve(undefined)), [agentId])
  // The parent is asked for only to know whether this viewer may see it: a
  // delegated run's parent may belong to an agent shared with someone else.
  const parentId = run.data?.parent_run_id
  const parent = useLoad(() => (parentId ? api.run(parentId) : Promise.resolve(undefined)), [parentId])
  // The tree is asked for again when this run delegates; a reconnected
  // stream replays the trace, so each delegated run counts once.
  const [treeAsked, askTree] = useReducer((n: number) => n + 1, 0)
  const delegatedSeen = useRef(new Set<string>())
  const onTrace = useCallback((ev: TraceEvent) => {
    if (ev.type !== 'delegated') return
    const child = typeof ev.data?.run_id === 'string' ? ev.data.run_id : ''
    if (delegatedSeen.current.has(child)) return
    delegatedSeen.current.add(child)
    askTree()
  }, [])
  // The summary follows the run's event stream (its status, tokens, start and end).
  const [live, setLive] = useState<LiveState>()
  const parentAgent = parent.data?.agent_id
  const names = useAgentNames(parentAgent ? [parentAgent] : [])
  const summary = run.data ? summarize(run.data, live) : undefined
  const going = !!summary && !!summary.startedAt && !summary.endedAt && !isTerminal(summary.status)
  const [now, tick] = useState(() => Date.now())
  useEffect(() => {
    if (!going) return
    const t = setInterval(() => tick(Date.now()), tickMs)
    return () => clearInterval(t)
  }, [going])
  const kind = runKind(run.data?.driver) ?? 'Run'
  useEffect(() => {
    document.title = `${kind} ${shortId(id)} · Corral`
  }, [id, kind])

  if (isNotFound(run.error) || isNotFound(agent.error)) {
    return <NoAccess text="This run does not exist or you no longer have access to its agent." />
  }
  if (!run.data) return run.error ? <ErrorText error={run.error} /> : <Loading what="the run" />
  const r = run.data
  const a = agent.data
  const sum = summary!

  return (
    <section>
      <p className="crumbs">
        <Link to="/">Agents</Link> / {a ? <Link to={`/agents/${encodeURIComponent(a.id)}?tab=runs`}>{a.name}</Link> : '…'} / run
      </p>
      <h1>
        {kind} {shortId(r.id)}
      </h1>
      <dl className="facts">
        <div className="fact">
          <dt>Status</dt>
          <dd>
            <StatusBadge status={endWord(r.driver, sum.status, sum.reason)} />
          </dd>
        </div>
        <div className="fact">
          <dt>Started by</dt>
          <dd>{r.triggered_by?.name ?? '—'}</dd>
        </div>
        <div className="fact">
          <dt>Tokens</dt>
          <dd>
            {sum.tokens.input} in, {sum.tokens.output} out
          </dd>
        </div>
        <div className="fact">
          <dt>Violation</dt>
          <dd>{r.violation ?? 'none'}</dd>
        </div>
        {sum.reason && (
          <div className="fact">
            <dt>Reason</dt>
            <dd>{sum.reason}</dd>
          </div>
        )}
        <div className="fact">
          <dt>Created</dt>
          <dd>{formatTime(r.created_at)}</dd>
        </div>
        <div className="fact">
          <dt>Started</dt>
          <dd>{formatTime(sum.startedAt)}</dd>
        </div>
        <div className="fact">
          <dt>Ended</dt>
          <dd>{formatTime(sum.endedAt)}</dd>
        </div>
        <div className="fact">
          <dt>Duration</dt>
          <dd>{sum.startedAt ? formatDuration(sum.startedAt, sum.endedAt, now) + (going ? ' so far' : '') : '—'}</dd>
        </div>
        {r.parent_run_id && (
          <div className="fact">
            <dt>Delegated by</dt>
            <dd>
              {isNotFound(parent.error) ? (
                <span className="muted">a run you cannot see</span>
              ) : (
                <>
                  <Link to={`/runs/${encodeURIComponent(r.parent_run_id)}`}>run {shortId(r.parent_run_id)}</Link>
                  {parentAgent && (
                    <>
                      {' of '}
                      <Link to={`/agents/${encodeURIComponent(parentAgent)}`}>{names.get(parentAgent) ?? `agent ${shortId(parentAgent)}`}</Link>
                    </>
                  )}
                </>
              )}
            </dd>
          </div>
        )}
        {r.depth > 0 && (
          <div className="fact">
            <dt>Delegation depth</dt>
            <dd>{r.depth}</dd>
          </div>
        )}
        <div className="fact">
          <dt>Change set</dt>
          <dd>
            {sum.changeSetId ? (
              <Link to={`/changes/${encodeURIComponent(sum.changeSetId)}`}>change set {shortId(sum.changeSetId)}</Link>
            ) : (
              'none'
            )}
          </dd>
        </div>
        <div className="fact">
          <dt>Id</dt>
          <dd>
            <code>{r.id}</code>
          </dd>
        </div>
      </dl>
      <ErrorText error={agent.error} />
      <RunTree run={r} refresh={treeAsked} />
      <h2>Trace</h2>
      {a ? (
        <RunView
          key={r.id}
          run={r}
          can={a.can}
          me={user}
          onEnded={() => void run.reload()}
          onTrace={onTrace}
          onState={setLive}
          agent={a}
          onAgentChange={agent.setData}
        />
      ) : (
        <Loading what="the trace" />
      )}
    </section>
  )
}
