// One run as it happens: its kind (a terminal or an agent CLI's run), its
// status, its timeline, the model's text or the CLI's output as it streams,
// and Stop, Kill and the terminal for those allowed. A run still
// going is followed over its event stream; one that is over is read from its
// trace.

import { lazy, Suspense, useEffect, useMemo, useReducer, useRef, useState } from 'react'
import { useAgentNames } from './agentNames'
import { api } from './api'
import { StatusBadge } from './badges'
import { driverInfo, isCLI, runKind } from './drivers'
import { errorMessage, isNotFound } from './errors'
import { ErrorText, Loading, noAccessText } from './feedback'
import { finished, initialLive, isTerminal, liveReducer, parseData, type LiveState } from './live'
import { canStop } from './runs'
import { Markdown } from './Markdown'
import { useHostAllower } from './Network'
import { canOpenTerminal, endWord } from './terminal'
import { toTimeline } from './timeline'
import { Timeline } from './Timeline'
import { printedLines } from './transcript'
import type { Agent, Can, Run, TraceEvent, User } from './types'

// xterm.js is loaded only when someone opens a terminal.
const Terminal = lazy(() => import('./Terminal').then((m) => ({ default: m.Terminal })))

interface Props {
  run: Run
  /** What the caller may do to the run's agent (the agent's `can`). */
  can: Can
  me: User | null
  /** Called once when a run this view followed ends. */
  onEnded?: (s: LiveState) => void
  /** Leaves usage events out (the conversation's compact view). */
  compact?: boolean
  /** Called with each trace event as it streams live (the run page follows its delegation tree on `delegated`). */
  onTrace?: (ev: TraceEvent) => void
  /** Called with the run's state as it changes (the run page's summary follows it). */
  onState?: (s: LiveState) => void
  /** The run's agent: a request its egress proxy refused offers "Allow this host" to those who may edit it. */
  agent?: Agent
  /** Called with the agent as the server answers once a host was allowed. */
  onAgentChange?: (a: Agent) => void
}

/** The agents a run's trace names by id: those it delegated to, or was refused. */
function delegatedAgents(events: TraceEvent[]): string[] {
  const ids: string[] = []
  for (const e of events) {
    const id = e.type === 'delegated' ? e.data?.agent_id : e.type === 'delegation_refused' && e.data?.tool !== 'create_agent' ? e.data?.target : undefined
    if (typeof id === 'string' && id !== '') ids.push(id)
  }
  return ids
}

export function RunView({ run, can, me, onEnded, compact, onTrace, onState, agent, onAgentChange }: Props) {
  const [state, dispatch] = useReducer(liveReducer, run, (r) => initialLive(r.id, r.status))
  const endedAtStart = useRef(isTerminal(run.status))
  const reported = useRef(false)
  // Read from the stream's listener, so a new callback does not reopen the stream.
  const traceHook = useRef(onTrace)
  useEffect(() => {
    traceHook.current = onTrace
  }, [onTrace])
  const [terminalOpen, setTerminalOpen] = useState(false)

  useEffect(() => {
    const id = run.id
    if (endedAtStart.current) {
      // Over already: the stored trace is all there is.
      let live = true
      api
        .trace(id)
        .then((items) => {
          if (live) for (const event of items) dispatch({ type: 'trace', event })
        })
        .catch((err) => live && dispatch({ type: 'error', message: isNotFound(err) ? noAccessText : errorMessage(err) }))
      return () => {
        live = false
      }
    }
    let closed = false
    let es: EventSource | null = null
    let retry: ReturnType<typeof setTimeout> | undefined

    const stop = () => {
      closed = true
      es?.close()
      clearTimeout(retry)
    }
    // The stream could not be (re)opened: ask the API where the run stands.
    const check = () => {
      api
        .run(id)
        .then((r) => {
          if (closed) return
          dispatch({ type: 'run', run: r })
          if (isTerminal(r.status)) stop()
          else retry = setTimeout(open, 2000)
        })
        .catch((err) => {
          if (closed) return
          dispatch({ type: 'error', message: isNotFound(err) ? noAccessText : errorMessage(err) })
          stop()
        })
    }
    let opened = false
    const open = () => {
      if (closed) return
      // A new EventSource starts from the beginning (only the browser's own
      // reconnects resume after the last id): the running tool's output
      // comes again whole.
      if (opened) dispatch({ type: 'reopened' })
      opened = true
      es = new EventSource(api.runEventsURL(id))
      es.addEventListener('trace', (e) => {
        const event = parseData<TraceEvent>((e as MessageEvent).data)
        if (!event) return
        dispatch({ type: 'trace', event })
        traceHook.current?.(event)
        // The server closes the stream after this; EventSource would reconnect.
        if (event.type === 'ended' || event.type === 'reconciled') stop()
      })
      es.addEventListener('delta', (e) => {
        const d = parseData<{ content?: string }>((e as MessageEvent).data)
        if (d && typeof d.content === 'string') dispatch({ type: 'delta', content: d.content })
      })
      es.addEventListener('output', (e) => {
        const o = parseData<{ tool_call_id?: string; content?: string }>((e as MessageEvent).data)
        if (o && typeof o.content === 'string' && typeof o.tool_call_id === 'string') {
          dispatch({ type: 'output', toolCallId: o.tool_call_id, content: o.content })
        }
      })
      es.addEventListener('error', (e) => {
        if (closed) return
        const data = (e as MessageEvent).data
        if (typeof data === 'string' && data !== '') {
          // The server's `event: error`: access is lost; nothing more will come.
          const body = parseData<{ error?: { message?: string } }>(data)
          dispatch({ type: 'error', message: body?.error?.message || noAccessText })
          stop()
          return
        }
        if (es && es.readyState === EventSource.CLOSED) {
          // Refused outright (an answer that is not a stream): the browser will not retry.
          es = null
          check()
        }
        // Otherwise the browser reconnects by itself, sending the last id it
        // got (Last-Event-ID): the events after it follow, none twice.
      })
    }
    open()
    return stop
  }, [run.id])

  const stateHook = useRef(onState)
  useEffect(() => {
    stateHook.current = onState
  }, [onState])
  useEffect(() => {
    stateHook.current?.(state)
  }, [state])

  useEffect(() => {
    if (state.ended && !endedAtStart.current && !reported.current) {
      reported.current = true
      onEnded?.(state)
    }
  }, [state, onEnded])

  const agentIds = useMemo(() => delegatedAgents(state.events), [state.events])
  const names = useAgentNames(agentIds)
  const allower = useHostAllower(agent, onAgentChange)
  let items = toTimeline(state.events, { names, driver: run.driver })
  if (compact) items = items.filter((i) => i.type !== 'usage')
  const going = !finished(state)
  const status = state.status === 'connecting' ? run.status : state.status
  const terminal = canOpenTerminal(can, status) ? { open: terminalOpen, toggle: () => setTerminalOpen((o) => !o) } : undefined
  const kind = runKind(run.driver)
  // An agent CLI's run streams what the CLI prints as the output of its one
  // command ("cli-N"): its JSON events become the timeline's steps as they
  // are recorded; only what else it prints (its warnings) is shown here.
  const cliOutput = isCLI(run.driver)
  const liveOutput = cliOutput ? printedLines(state.toolOutput).join('\n') : state.toolOutput

  return (
    <div className="run-view">
      <p role="status" aria-live="polite" className="run-status">
        {kind ?? 'Run'} status: <StatusBadge status={endWord(run.driver, status, state.reason ?? run.reason)} />
        {state.reason && <span className="muted"> — {state.reason}</span>}
      </p>
      {state.error && (
        <p role="alert" className="error">
          {state.error}
        </p>
      )}
      {going && <RunControls run={run} can={can} me={me} terminal={terminal} />}
      {/* Stays once opened, after the run ends too: the last screen and why it closed. */}
      {terminalOpen && (
        <Suspense fallback={<Loading what="the terminal" />}>
          <Terminal runId={run.id} />
        </Suspense>
      )}
      <Timeline items={items} label="Run timeline" allower={allower} />
      {liveOutput && (
        <section className="streaming" aria-label="Tool output so far">
          <span className="muted">
            {cliOutput ? `${driverInfo(run.driver).label} is running; what it printed besides its steps:` : 'The command is running; its output so far:'}
          </span>
          <pre className="pre">{liveOutput}</pre>
        </section>
      )}
      {state.streaming && (
        <div className="streaming" aria-live="off">
          <span className="muted">The model is writing…</span>
          <Markdown text={state.streaming} />
        </div>
      )}
    </div>
  )
}

interface TerminalToggle {
  open: boolean
  toggle: () => void
}

function RunControls({ run, can, me, terminal }: { run: Run; can: Can; me: User | null; terminal?: TerminalToggle }) {
  const [error, setError] = useState<unknown>()
  const [asked, setAsked] = useState<'stop' | 'kill'>()
  const stoppable = canStop(can, run, me)
  const killable = can.includes('kill_run')
  if (!stoppable && !killable && !terminal) return null

  async function act(what: 'stop' | 'kill') {
    setError(undefined)
    setAsked(what)
    try {
      if (what === 'stop') await api.stopRun(run.id)
      else await api.killRun(run.id)
    } catch (err) {
      setError(err)
      setAsked(undefined)
    }
  }

  return (
    <div className="run-controls">
      {terminal && (
        <button type="button" className="secondary" aria-expanded={terminal.open} onClick={terminal.toggle}>
          Terminal
        </button>
      )}
      {stoppable && (
        <button type="button" className="secondary" onClick={() => act('stop')} disabled={asked !== undefined}>
          Stop
        </button>
      )}
      {killable && (
        <button type="button" className="danger" onClick={() => act('kill')} disabled={asked === 'kill'}>
          Kill
        </button>
      )}
      {asked === 'stop' && <span className="muted">Stopping at the next safe point…</span>}
      {asked === 'kill' && <span className="muted">Killing…</span>}
      <ErrorText error={error} />
    </div>
  )
}
