// An agent's page: the conversation with live run progress (and the
// sources of answers that drew on documents), its runs, change sets,
// workspace files, documents and (for the owner) sharing. It polls, so a
// run someone else starts shows up and a revoked grant ends in a clear
// message rather than a broken page.

import { useCallback, useEffect, useRef, useState, type FormEvent, type KeyboardEvent } from 'react'
import { api } from '../api'
import { AgentHeader, type Section } from '../AgentHeader'
import { ClassBadge, StatusBadge } from '../badges'
import { driverInfo, isCLI, runDriverLabel } from '../drivers'
import { isNotFound } from '../errors'
import { ErrorText, Loading, NoAccess, useLoad } from '../feedback'
import { Field } from '../Field'
import { formatTime, shortId } from '../format'
import { Markdown } from '../Markdown'
import { shownName } from '../names'
import { isActive } from '../runs'
import { Link, navigate, useLocation } from '../router'
import type { LiveState } from '../live'
import { RunView } from '../RunView'
import { useSession } from '../session'
import { SharingPanel } from '../Sharing'
import { endWord } from '../terminal'
import { FileBrowser } from '../Files'
import { DocumentsTab, MessageSources } from '../Documents'
import { RepositoryPanel } from '../Repository'
import { ReviewCallout } from '../ReviewCallout'
import { inboxStale } from '../review'
import type { Agent, ChangeSet, Message, Run } from '../types'

const pollMs = 4000

function signature(runs: Run[] | undefined): string {
  return (runs ?? []).map((r) => `${r.id}:${r.status}:${r.change_set_id ?? ''}`).join(',')
}

export function AgentPage({ id }: { id: string }) {
  const { user } = useSession()
  const { query } = useLocation()
  const tab = (query.get('tab') ?? 'conversation') as Section
  const agent = useLoad(() => api.agent(id), [id])
  const messages = useLoad(() => api.messages(id), [id])
  const runs = useLoad(() => api.runs(id), [id])
  const changes = useLoad(() => api.changes(id), [id])
  const [watched, setWatched] = useState<Run | null>(null)
  const lastSig = useRef<string | null>(null)

  // The watched run as the runs list last saw it.
  const current = (watched && runs.data?.find((r) => r.id === watched.id)) || watched

  // Follow the newest run while it is going, whoever started it.
  useEffect(() => {
    const newest = runs.data?.[0]
    if (newest && isActive(newest.status) && (!current || (current.id !== newest.id && !isActive(current.status)))) {
      setWatched(newest)
    }
    const sig = signature(runs.data)
    if (lastSig.current !== null && sig !== lastSig.current) {
      void messages.reload()
      void changes.reload()
    }
    if (runs.data) lastSig.current = sig
    // Only a new runs list matters here; the reloads are stable per agent.
  }, [runs.data])

  const reloadAgent = agent.reload
  const reloadRuns = runs.reload
  useEffect(() => {
    const t = setInterval(() => {
      if (document.hidden) return
      void reloadAgent()
      void reloadRuns()
    }, pollMs)
    return () => clearInterval(t)
  }, [reloadAgent, reloadRuns])

  // The agent's count of waiting change sets moved (a run left one, one
  // was decided): the header's Inbox count follows.
  const pending = agent.data?.pending_changes
  const lastPending = useRef<number | undefined>(undefined)
  useEffect(() => {
    if (pending === undefined) return
    if (lastPending.current !== undefined && lastPending.current !== pending) inboxStale()
    lastPending.current = pending
  }, [pending])

  const onRunEnded = useCallback(() => {
    void messages.reload()
    void runs.reload()
    void changes.reload()
    void agent.reload()
    // The reload functions change only with the agent id.
  }, [id])

  useEffect(() => {
    if (agent.data) document.title = `${agent.data.name} · Corral`
  }, [agent.data])

  if (isNotFound(agent.error)) return <NoAccess />
  if (!agent.data) return agent.error ? <ErrorText error={agent.error} /> : <Loading what="the agent" />
  const a = agent.data

  return (
    <section>
      <AgentHeader agent={a} section={tab} onChange={agent.setData} />
      {agent.error !== undefined && <ErrorText error={agent.error} />}
      {tab === 'conversation' && <ReviewCallout agent={a} changes={changes.data} />}
      {tab === 'conversation' && (
        <Conversation
          agent={a}
          messages={messages.data}
          messagesError={messages.error}
          watched={watched}
          watchedStatus={current?.status}
          onSent={(m, r) => {
            messages.setData([...(messages.data ?? []), m])
            setWatched(r)
            void runs.reload()
          }}
          onRunEnded={onRunEnded}
          onAgentChange={agent.setData}
          me={user}
        />
      )}
      {tab === 'runs' && <RunsList runs={runs.data} error={runs.error} />}
      {tab === 'changes' && <ChangesList changes={changes.data} error={changes.error} />}
      {tab === 'files' && <FileBrowser agent={a} path={query.get('path') ?? ''} />}
      {tab === 'documents' && <DocumentsTab agent={a} />}
      {tab === 'repository' && <RepositoryPanel agent={a} />}
      {tab === 'sharing' && (a.can.includes('share') ? <SharingPanel agent={a} /> : <p>Only the owner shares this agent.</p>)}
    </section>
  )
}

function Conversation({
  agent,
  messages,
  messagesError,
  watched,
  watchedStatus,
  onSent,
  onRunEnded,
  onAgentChange,
  me,
}: {
  agent: Agent
  messages?: Message[]
  messagesError?: unknown
  watched: Run | null
  watchedStatus?: string
  onSent: (m: Message, r: Run) => void
  onRunEnded: () => void
  onAgentChange: (a: Agent) => void
  me: ReturnType<typeof useSession>['user']
}) {
  // The watched run's status as its event stream says, ahead of the runs list's next poll.
  const [live, setLive] = useState<{ runId: string; status: string }>()
  const onState = useCallback((s: LiveState) => {
    if (s.status !== 'connecting') setLive((old) => (old?.runId === s.runId && old.status === s.status ? old : { runId: s.runId, status: s.status }))
  }, [])
  const shownStatus = (watched && live?.runId === watched.id ? live.status : undefined) ?? watchedStatus ?? watched?.status
  return (
    <div className="conversation">
      <section aria-labelledby="thread-heading">
        <h2 id="thread-heading">Conversation</h2>
        <ErrorText error={messagesError} />
        {!messages && !messagesError && <Loading what="the conversation" />}
        {messages && messages.length === 0 && <p className="empty">No messages yet.</p>}
        {messages && messages.length > 0 && (
          <ol className="thread" aria-label="Thread">
            {messages.map((m) => (
              <li key={m.id} className={`msg msg-${m.role}`}>
                <div className="msg-meta">
                  <strong>{m.role === 'assistant' ? agent.name : (m.author?.name ?? 'A former member')}</strong>
                  <span className="muted"> {m.role === 'assistant' ? 'agent' : 'person'}</span>
                  <time dateTime={m.created_at} className="muted">
                    {' · '}
                    {formatTime(m.created_at)}
                  </time>
                  {m.run_id && (
                    <>
                      {' · '}
                      <Link to={`/runs/${encodeURIComponent(m.run_id)}`}>run {shortId(m.run_id)}</Link>
                    </>
                  )}
                </div>
                {m.role === 'assistant' ? <Markdown text={m.content} className="msg-body" /> : <div className="msg-body msg-text">{m.content}</div>}
                {m.role === 'assistant' && <MessageSources sources={m.sources} />}
              </li>
            ))}
          </ol>
        )}
      </section>
      {watched && (
        <section aria-labelledby="live-heading" className="live">
          <h2 id="live-heading">
            {isActive(shownStatus ?? watched.status) ? 'Run in progress' : 'Latest run'}{' '}
            <Link to={`/runs/${encodeURIComponent(watched.id)}`} className="small">
              open run {shortId(watched.id)}
            </Link>
          </h2>
          <RunView
            key={watched.id}
            run={watched}
            can={agent.can}
            me={me}
            onEnded={onRunEnded}
            onState={onState}
            agent={agent}
            onAgentChange={onAgentChange}
            compact
          />
        </section>
      )}
      {agent.can.includes('send_message') ? (
        <SendForm agent={agent} onSent={onSent} />
      ) : (
        <p className="muted">You can read this agent’s conversation; your access does not include sending it messages.</p>
      )}
      {(agent.access === 'editor' || agent.access === 'owner') && <TerminalRunButton agent={agent} />}
    </div>
  )
}

/** Starts a terminal run: a shell in the agent's sandbox, with no model; its changes are reviewed like a run's. */
function TerminalRunButton({ agent }: { agent: Agent }) {
  const [error, setError] = useState<unknown>()
  const [busy, setBusy] = useState(false)
  async function start() {
    setBusy(true)
    setError(undefined)
    try {
      const run = await api.startTerminal(agent.id)
      navigate(`/runs/${encodeURIComponent(run.id)}`)
    } catch (err) {
      setError(err)
      setBusy(false)
    }
  }
  return (
    <div className="stack">
      <ErrorText error={error} />
      <div>
        <button type="button" disabled={busy} onClick={() => void start()}>
          Start a terminal run
        </button>{' '}
        <span className="muted small">A shell in {agent.name}’s sandbox, without the model; what you change is proposed for review when you stop it.</span>
      </div>
    </div>
  )
}

function SendForm({ agent, onSent }: { agent: Agent; onSent: (m: Message, r: Run) => void }) {
  const [content, setContent] = useState('')
  const [error, setError] = useState<unknown>()
  const [busy, setBusy] = useState(false)

  async function send(e?: FormEvent) {
    e?.preventDefault()
    if (content.trim() === '' || busy) return
    setBusy(true)
    setError(undefined)
    try {
      const posted = await api.postMessage(agent.id, content)
      setContent('')
      onSent(posted.message, posted.run)
    } catch (err) {
      setError(err)
    } finally {
      setBusy(false)
    }
  }

  function keys(e: KeyboardEvent<HTMLTextAreaElement>) {
    if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) void send()
  }

  return (
    <form onSubmit={send} className="send stack">
      <Field
        label="Message"
        hint={`Ctrl+Enter sends. Each message starts a run${isCLI(agent.driver) ? ` of ${driverInfo(agent.driver).label} in the agent’s sandbox` : ''}.`}
      >
        {(p) => (
          <textarea
            {...p}
            rows={3}
            value={content}
            onChange={(e) => setContent(e.target.value)}
            onKeyDown={keys}
            placeholder={`Ask ${agent.name} to do something`}
          />
        )}
      </Field>
      <ErrorText error={error} />
      <div>
        <button type="submit" disabled={busy || content.trim() === ''}>
          Send
        </button>
      </div>
    </form>
  )
}

function RunsList({ runs, error }: { runs?: Run[]; error?: unknown }) {
  return (
    <section aria-labelledby="runs-heading">
      <h2 id="runs-heading">Runs</h2>
      <ErrorText error={error} />
      {!runs && !error && <Loading what="runs" />}
      {runs && runs.length === 0 && <p className="empty">No runs yet: each message starts one.</p>}
      {runs && runs.length > 0 && (
        <table className="list">
          <thead>
            <tr>
              <th scope="col">Run</th>
              <th scope="col">Status</th>
              <th scope="col">Started by</th>
              <th scope="col">Tokens (in / out)</th>
              <th scope="col">Violation</th>
              <th scope="col">Created</th>
              <th scope="col">Ended</th>
            </tr>
          </thead>
          <tbody>
            {runs.map((r) => (
              <tr key={r.id}>
                <th scope="row">
                  <Link to={`/runs/${encodeURIComponent(r.id)}`}>run {shortId(r.id)}</Link>
                  {runDriverLabel(r.driver) && <span className="muted small"> · {runDriverLabel(r.driver)}</span>}
                </th>
                <td>
                  <StatusBadge status={endWord(r.driver, r.status, r.reason)} />
                </td>
                <td>{r.triggered_by?.name ?? '—'}</td>
                <td>
                  {r.tokens.input} / {r.tokens.output}
                </td>
                <td>{r.violation ?? '—'}</td>
                <td>{formatTime(r.created_at)}</td>
                <td>{formatTime(r.ended_at)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  )
}

function ChangesList({ changes, error }: { changes?: ChangeSet[]; error?: unknown }) {
  return (
    <section aria-labelledby="changes-heading">
      <h2 id="changes-heading">Change sets</h2>
      <p className="muted">What runs changed in their staged workspace, as proposals.</p>
      <ErrorText error={error} />
      {!changes && !error && <Loading what="change sets" />}
      {changes && changes.length === 0 && <p className="empty">No change sets yet.</p>}
      {changes && changes.length > 0 && (
        <table className="list">
          <thead>
            <tr>
              <th scope="col">Change set</th>
              <th scope="col">Status</th>
              <th scope="col">Files</th>
              <th scope="col">Classes</th>
              <th scope="col">Created</th>
            </tr>
          </thead>
          <tbody>
            {changes.map((c) => {
              const classes = [...new Set(c.entries.map((e) => e.class))]
              return (
                <tr key={c.id}>
                  <th scope="row">
                    <Link to={`/changes/${encodeURIComponent(c.id)}`}>change set {shortId(c.id)}</Link>
                  </th>
                  <td>
                    <StatusBadge status={c.status} />
                  </td>
                  <td>{c.entries.map((e) => shownName(e).text).join(', ')}</td>
                  <td>
                    {classes.map((cl) => (
                      <ClassBadge key={cl} cls={cl} />
                    ))}
                  </td>
                  <td>{formatTime(c.created_at)}</td>
                </tr>
              )
            })}
          </tbody>
        </table>
      )}
    </section>
  )
}
