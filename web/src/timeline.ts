// Turning a run's trace events into timeline entries in words. The event
// data shapes are those internal/runner records (an agent CLI's transcript
// steps are internal/driver's Event).

import { driverInfo, isCLI, protocolName } from './drivers'
import { formatBytes, formatConfidence, formatScore, shortId } from './format'
import { endWord } from './terminal'
import { bounded, num, plural, printedLines, str, toolStep, transcriptStep, type Data, type Fold, type Step } from './transcript'
import type { TraceEvent } from './types'

export { maxStepText } from './transcript'

export type Tone = 'info' | 'tool' | 'output' | 'model' | 'good' | 'warn' | 'bad'

export interface TimelineItem {
  seq: number
  at: string
  type: string
  title: string
  /** Longer text shown under the title, monospaced (output, arguments, a message). */
  detail?: string
  /** Short facts shown beside the title. */
  facts: string[]
  tone: Tone
  /** A page of the app the entry points to (a delegated run, a created agent), shown after the title. */
  link?: { to: string; text: string }
  /** The model's words, shown as Markdown (a CLI's message). */
  markdown?: string
  /** Longer text shown folded: a command's output, a file's new content. */
  fold?: Fold
  /** A request the egress proxy refused (`egress_denied`): the entry may offer to allow its host. */
  refused?: { host: string; port?: number }
}

/** What the page knows beside the events. */
export interface TimelineOptions {
  /** Agents' names by id, for delegation; an id without one is shown short. */
  names?: ReadonlyMap<string, string>
  /** The run's driver: a terminal run's end reads in its own words. */
  driver?: string
}


function budgetFact(d: Data, usedKey = 'budget_used', tokensKey = 'budget_tokens'): string | undefined {
  const used = num(d[usedKey])
  const tokens = num(d[tokensKey])
  if (used === undefined) return undefined
  return tokens ? `budget ${used} of ${tokens} tokens` : `${used} tokens used, no budget limit`
}

/**
 * The arguments of a tool call for people: a shell command as the command,
 * a file write as its path and size, anything else as compact JSON.
 */
export function describeArguments(name: string, raw: unknown): string | undefined {
  if (typeof raw !== 'string' || raw === '') return undefined
  let args: unknown
  try {
    args = JSON.parse(raw)
  } catch {
    return raw // cut off in the trace, or not JSON: show as is
  }
  if (args && typeof args === 'object' && !Array.isArray(args)) {
    const a = args as Data
    if (name === 'shell' && typeof a.command === 'string') return `$ ${a.command}`
    if (name === 'write_file' && typeof a.path === 'string') {
      const content = typeof a.content === 'string' ? a.content : ''
      return `${a.path} (${plural(new TextEncoder().encode(content).length, 'byte')})\n${content}`
    }
    if ((name === 'read_file' || name === 'list_files') && typeof a.path === 'string') return a.path
  }
  return JSON.stringify(args, null, 2)
}

function runLink(id: string): { to: string; text: string } {
  return { to: `/runs/${encodeURIComponent(id)}`, text: `run ${shortId(id)}` }
}

/** An agent as a person knows it: by its name, or by a short id when the page has none. */
export function agentName(id: string, names?: ReadonlyMap<string, string>): string {
  return names?.get(id) ?? `agent ${shortId(id)}`
}

/** A delegate call's arguments in words: the agent by name, then the task. */
function delegateCall(raw: unknown, names?: ReadonlyMap<string, string>): string | undefined {
  if (typeof raw !== 'string') return undefined
  try {
    const a = JSON.parse(raw) as Data
    const id = str(a?.agent_id)
    const task = typeof a?.task === 'string' ? a.task : ''
    return id ? `to ${agentName(id, names)}:\n${task}` : undefined
  } catch {
    return undefined // cut off in the trace: shown as it is
  }
}

function stepItem(base: Pick<TimelineItem, 'seq' | 'at' | 'type'>, s: Step): TimelineItem {
  return { ...base, ...s }
}

/**
 * The tree caps a refused hop may name (`cap` of delegation_refused), in
 * words, with the server setting that raises each.
 */
export const capWords: Record<string, string> = {
  delegation_depth: 'The chain of delegated runs is as deep as this server allows (--delegation-depth).',
  delegation_fanout: 'This run has delegated to as many runs as this server allows one run (--delegation-fanout).',
  delegation_concurrency:
    'The tree already has as many delegated runs going at once as this server allows (--delegation-concurrency); a later try may fit.',
  delegation_create: 'The tree has created as many agents as this server allows (--delegation-create).',
}

/** The CLI's own command in the run's session (id "cli-N", named by the driver), not a tool of Corral's loop. */
function isCLICommand(d: Data): boolean {
  return typeof d.id === 'string' && d.id.startsWith('cli-') && isCLI(str(d.name))
}

/** One trace event as a timeline entry. Unknown types are shown with their data, never dropped. */
export function toTimelineItem(ev: TraceEvent, opts: TimelineOptions = {}): TimelineItem {
  const d: Data = ev.data && typeof ev.data === 'object' ? ev.data : {}
  const base = { seq: ev.seq, at: ev.at, type: ev.type }
  const facts: string[] = []
  // The cast goes once api.gen.ts's TraceType has the egress events (see egress.ts).
  switch (ev.type) {
    case 'admitted': {
      const bytes = num(d.prompt_bytes)
      if (bytes !== undefined) facts.push(`prompt ${plural(bytes, 'byte')}`)
      const admitted = num(d.runs_admitted)
      if (admitted !== undefined) facts.push(`${plural(admitted, 'run')} admitted before`)
      const b = budgetFact(d, 'tokens_used', 'tokens_budget')
      if (b) facts.push(b)
      return { ...base, title: 'Admitted', facts, tone: 'info' }
    }
    case 'started': {
      const model = str(d.model)
      const driver = str(d.driver)
      if (isCLI(driver)) facts.push(driverInfo(driver).label)
      // A terminal run has a person at its shell, and no model.
      if (driver !== 'terminal') facts.push(model ? `model ${model}` : 'default model')
      if (str(d.fs)) facts.push(`workspace ${d.fs}`)
      if (str(d.changes)) facts.push(`changes: ${d.changes}`)
      return { ...base, title: 'Started', facts, tone: 'info' }
    }
    case 'message': {
      const calls = Array.isArray(d.tool_calls) ? (d.tool_calls as Data[]) : []
      const names = calls.map((c) => str(c?.name)).filter((n): n is string => !!n)
      if (names.length > 0) facts.push(`asks for ${names.join(', ')}`)
      if (str(d.model)) facts.push(`${d.model}`)
      // The model's words, as the answer shows them: Markdown, rendered safely.
      return { ...base, title: 'Assistant', markdown: str(d.content), facts, tone: 'model' }
    }
    case 'tool_call': {
      if (isCLICommand(d)) return { ...base, title: `${driverInfo(str(d.name)).label} started`, facts, tone: 'tool' }
      const name = str(d.name) ?? 'tool'
      const to = name === 'delegate' ? delegateCall(d.arguments, opts.names) : undefined
      return { ...base, title: `Tool call: ${name}`, detail: to ?? describeArguments(name, d.arguments), facts, tone: 'tool' }
    }
    case 'tool_result': {
      const name = str(d.name) ?? 'tool'
      const code = num(d.exit_code)
      const violation = str(d.violation)
      const error = str(d.error)
      if (code !== undefined) facts.push(`exit ${code}`)
      if (violation) facts.push(`limit reached: ${violation}`)
      if (d.truncated === true) facts.push('output cut')
      const output = str(d.output)
      const detail = [error ? `error: ${error}` : undefined, output].filter(Boolean).join('\n') || undefined
      const failed = !!violation || !!error || (code !== undefined && code !== 0)
      if (isCLICommand(d)) {
        // Its output's last lines: the JSON events are the steps above;
        // what else it printed (its stderr) is shown folded, as warnings
        // unless the CLI failed.
        const printed = printedLines(output ?? '')
        const label = driverInfo(name).label
        return {
          ...base,
          title: failed ? `${label} failed` : `${label} finished`,
          detail: error ? `error: ${error}` : undefined,
          fold: printed.length > 0 ? { summary: `${failed ? 'What it printed' : 'Warnings it printed'} (${plural(printed.length, 'line')})`, text: bounded(printed.join('\n')) ?? '' } : undefined,
          facts,
          tone: failed ? 'bad' : 'output',
        }
      }
      return { ...base, title: `Tool output: ${name}`, detail, facts, tone: failed ? 'warn' : 'output' }
    }
    case 'usage': {
      // An agent CLI's model call through the gateway also says which
      // protocol and model, the provider's status, and whether the tokens
      // are the provider's count or an estimate.
      const input = num(d.input) ?? 0
      const output = num(d.output) ?? 0
      // The provider reported none: the gateway counted them itself.
      const estimated = d.estimated === true
      const model = str(d.model)
      if (model) facts.push(`model ${model}`)
      const protocol = str(d.protocol)
      if (protocol) facts.push(`via ${protocolName(protocol)}`)
      const status = num(d.status)
      const ok = status !== undefined && status >= 200 && status < 300
      if (status !== undefined && !ok) facts.push(status ? `provider answered ${status}` : 'no answer from the provider')
      if (d.aborted === true) facts.push('aborted before the answer ended')
      const b = budgetFact(d)
      if (b) facts.push(b)
      const error = str(d.error)
      const failed = d.aborted === true || !!error || (status !== undefined && !ok)
      return {
        ...base,
        title: `Tokens${estimated ? ' (estimated)' : ''}: ${input} in, ${output} out`,
        detail: error ? `error: ${error}` : undefined,
        facts,
        tone: failed ? 'warn' : 'info',
      }
    }
    case 'transcript':
      return stepItem(base, transcriptStep(d))
    case 'gateway_note': {
      const dropped = Array.isArray(d.dropped) ? d.dropped.filter((x): x is string => typeof x === 'string' && x !== '') : []
      const protocol = str(d.protocol)
      if (protocol) facts.push(`via ${protocolName(protocol)}`)
      return {
        ...base,
        title: `The gateway left out: ${dropped.length > 0 ? dropped.join(', ') : 'part of the request'}`,
        detail: 'The provider has no equivalent for these parts of the CLI’s request, so they were not sent.',
        facts,
        tone: 'warn',
      }
    }
    case 'violation':
      return { ...base, title: `Limit reached: ${str(d.limit) ?? 'unknown'}`, facts, tone: 'bad' }
    case 'retry': {
      const status = num(d.status)
      const wait = num(d.wait_ms)
      facts.push(status ? `provider answered ${status}` : 'no answer from the provider')
      if (wait !== undefined) facts.push(`waiting ${(wait / 1000).toFixed(wait % 1000 === 0 ? 0 : 1)} s`)
      const attempt = num(d.attempt)
      return { ...base, title: `Model call retried${attempt !== undefined ? ` (try ${attempt})` : ''}`, detail: str(d.message), facts, tone: 'warn' }
    }
    case 'paused': {
      // A parent whose delegated run paused waits for it instead of spending.
      const child = str(d.waiting_for)
      if (child) {
        return {
          ...base,
          title: 'Paused: waiting for a delegated run, which is paused',
          detail: 'This run goes on when that one resumes.',
          facts,
          tone: 'warn',
          link: runLink(child),
        }
      }
      const b = budgetFact(d)
      if (b) facts.push(b)
      const needed = num(d.budget_needed)
      if (needed) facts.push(`the next call needs up to ${needed} tokens left`)
      return { ...base, title: 'Paused: the token budget cannot hold the next model call', facts, tone: 'warn' }
    }
    case 'resumed': {
      const b = budgetFact(d)
      if (b) facts.push(b)
      return { ...base, title: 'Resumed', facts, tone: 'info' }
    }
    case 'quarantined': {
      const n = num(d.violations)
      return {
        ...base,
        title: 'Agent quarantined',
        detail: n !== undefined ? `${plural(n, 'violation')} within the window; its owner must release it.` : undefined,
        facts,
        tone: 'bad',
      }
    }
    case 'ended': {
      const status = str(d.status) ?? 'ended'
      if (str(d.violation)) facts.push(`limit: ${d.violation}`)
      const t = d.tokens as Data | undefined
      if (t && typeof t === 'object') facts.push(`${num(t.input) ?? 0} in, ${num(t.output) ?? 0} out tokens`)
      // A terminal run its person stopped simply ended.
      const word = endWord(opts.driver, status, str(d.reason))
      if (word === 'ended') return { ...base, title: 'Ended', detail: str(d.reason), facts, tone: 'good' }
      const tone: Tone = status === 'completed' ? 'good' : status === 'cancelled' ? 'warn' : 'bad'
      return { ...base, title: `Ended: ${status}`, detail: str(d.reason), facts, tone }
    }
    case 'reconciled': {
      const prev = str(d.previous_status)
      return {
        ...base,
        title: 'Reconciled after a restart',
        detail: prev ? `It was ${prev} when the server stopped.` : undefined,
        facts,
        tone: 'warn',
      }
    }
    case 'reattached':
      return {
        ...base,
        title: 'Re-attached after a restart',
        detail: 'The run’s sandbox outlived the server; the run goes on from where it was.',
        facts,
        tone: 'warn',
      }
    case 'delegated': {
      const agent = str(d.agent_id)
      const child = str(d.run_id)
      const depth = num(d.depth)
      if (depth !== undefined) facts.push(`depth ${depth}`)
      return {
        ...base,
        title: `Delegated to ${agent ? agentName(agent, opts.names) : 'an agent'}${child ? ':' : ''}`,
        facts,
        tone: 'tool',
        link: child ? runLink(child) : undefined,
      }
    }
    case 'delegation_refused': {
      // A refused hop is the tool's error, never the run's end: a warning.
      const error = str(d.error) ?? 'refused'
      const cap = str(d.cap)
      const target = str(d.target)
      const creating = d.tool === 'create_agent'
      if (cap) facts.push(`cap: ${cap}`)
      // The model may have named an agent that does not exist: its words are shown as they were.
      if (target) facts.push(creating ? `name ${target}` : opts.names?.has(target) ? `agent ${opts.names.get(target)}` : `agent ${target}`)
      return {
        ...base,
        title: `${creating ? 'Agent creation refused' : 'Delegation refused'}: ${error}`,
        detail: cap ? capWords[cap] : undefined,
        facts,
        tone: 'warn',
      }
    }
    case 'agent_created': {
      const id = str(d.agent_id)
      if (str(d.fs)) facts.push(`workspace ${d.fs}`)
      return {
        ...base,
        title: `Created agent ${str(d.name) ?? id ?? 'unnamed'}`,
        facts,
        tone: 'info',
        link: id ? { to: `/agents/${encodeURIComponent(id)}`, text: `agent ${shortId(id)}` } : undefined,
      }
    }
    case 'retrieved': {
      // What retrieval handed the model: for the person's message, or for a
      // search_documents call (tool_call_id); nothing when it was not sure.
      const hits = Array.isArray(d.items) ? (d.items as Data[]).filter((h) => h && typeof h === 'object') : []
      const confidence = num(d.confidence)
      const sure = confidence !== undefined ? ` (confidence ${formatConfidence(confidence)})` : ''
      const found = d.answerable !== false && hits.length > 0
      facts.push(str(d.tool_call_id) ? 'for search_documents' : 'for the message')
      const failed = str(d.error)
      if (failed) return { ...base, title: `Retrieval failed: ${failed}`, facts, tone: 'warn' }
      const ranker = str(d.ranker)
      if (ranker) facts.push(ranker === 'fused' ? 'BM25 and embeddings' : ranker === 'bm25' ? 'BM25' : ranker)
      const lines = hits.map((h) => {
        const score = num(h.score)
        return [str(h.name) ?? str(h.document_id) ?? 'a document', str(h.source), score !== undefined ? `score ${formatScore(score)}` : undefined]
          .filter(Boolean)
          .join(' · ')
      })
      const note = str(d.note)
      const detail = [...(found ? lines : []), note ? `note: ${note}` : undefined].filter(Boolean).join('\n') || undefined
      return {
        ...base,
        title: found ? `Retrieved ${plural(hits.length, 'passage')}${sure}` : `Nothing relevant found${sure}`,
        detail,
        facts,
        // Finding nothing is retrieval working as meant (no weak passages), not a fault.
        tone: 'info',
      }
    }
    case 'egress_denied': {
      // A request the egress proxy refused, and the proxy's words on why.
      const host = str(d.host)
      const port = num(d.port)
      const target = host ? `${host}${port !== undefined ? `:${port}` : ''}${str(d.path) ?? ''}` : 'a host'
      const rule = str(d.rule)
      return {
        ...base,
        title: `Refused: ${[str(d.method), target].filter(Boolean).join(' ')}${rule ? ` — ${rule}` : ''}`,
        facts,
        tone: 'warn',
        refused: host ? { host, port } : undefined,
      }
    }
    case 'egress': {
      // What a run exchanged with one host through the egress proxy.
      const out = num(d.bytes_out)
      if (out !== undefined) facts.push(`${formatBytes(out)} out`)
      return {
        ...base,
        title: `${str(d.host) ?? 'a host'}: ${plural(num(d.requests) ?? 0, 'request')}, ${formatBytes(num(d.bytes_in) ?? 0)} in`,
        facts,
        tone: 'info',
      }
    }
    case 'terminal_opened':
      return { ...base, title: `Terminal opened by ${str(d.user) ?? 'someone'}`, facts, tone: 'info' }
    case 'terminal_closed': {
      const typed = num(d.bytes_in)
      const shown = num(d.bytes_out)
      if (typed !== undefined) facts.push(`${plural(typed, 'byte')} typed`)
      if (shown !== undefined) facts.push(`${plural(shown, 'byte')} shown`)
      return { ...base, title: `Terminal closed by ${str(d.user) ?? 'someone'}`, facts, tone: 'info' }
    }
    default:
      return { ...base, title: ev.type, detail: JSON.stringify(d, null, 2), facts, tone: 'info' }
  }
}

/**
 * The events in order, each once (a reconnected stream repeats what it
 * sent), as entries. A CLI's tool result is folded into its call's entry
 * (one step: the command, how it ended, its output); a CLI's error reads as
 * a warning, except the last one before the CLI failed, which is why.
 */
export function toTimeline(events: TraceEvent[], opts: TimelineOptions = {}): TimelineItem[] {
  const evs = mergeEvents([], events)
  const why = failureCauses(evs)
  const out: TimelineItem[] = []
  // The calls of the CLI command now going, by id, waiting for results.
  let calls = new Map<string, { at: number; data: Data }>()
  for (const ev of evs) {
    const d: Data = ev.data && typeof ev.data === 'object' ? ev.data : {}
    const base = { seq: ev.seq, at: ev.at, type: ev.type }
    if (ev.type === 'tool_call' && isCLICommand(d)) calls = new Map() // a new start of the CLI: ids begin again
    if (ev.type === 'transcript' && d.kind === 'tool_call') {
      const id = str(d.id)
      if (id) calls.set(id, { at: out.length, data: d })
      out.push(stepItem(base, toolStep(d)))
      continue
    }
    if (ev.type === 'transcript' && d.kind === 'tool_result') {
      const call = str(d.id) ? calls.get(str(d.id)!) : undefined
      if (call) {
        calls.delete(str(d.id)!)
        const prev = out[call.at]
        out[call.at] = { ...stepItem({ seq: prev.seq, at: prev.at, type: prev.type }, toolStep(call.data, d)) }
        continue
      }
    }
    if (ev.type === 'transcript' && d.kind === 'error' && why.has(ev.seq)) {
      out.push(stepItem(base, transcriptStep(d, true)))
      continue
    }
    out.push(toTimelineItem(ev, opts))
  }
  return out
}

/**
 * The CLI errors that say why a CLI failed: in each start of a CLI that
 * ended with a non-zero exit or a crossed limit (or in a run that ended
 * errored with no such end recorded), its last error.
 */
function failureCauses(evs: TraceEvent[]): Set<number> {
  const causes = new Set<number>()
  let lastError: number | undefined
  let open = false // a CLI started and not yet ended
  for (const ev of evs) {
    const d: Data = ev.data && typeof ev.data === 'object' ? ev.data : {}
    if (ev.type === 'tool_call' && isCLICommand(d)) {
      open = true
      lastError = undefined
    } else if (ev.type === 'transcript' && d.kind === 'error') {
      lastError = ev.seq
    } else if (ev.type === 'tool_result' && isCLICommand(d)) {
      const code = num(d.exit_code)
      if ((str(d.violation) || (code !== undefined && code !== 0)) && lastError !== undefined) causes.add(lastError)
      open = false
      lastError = undefined
    } else if (ev.type === 'ended' && open && d.status === 'errored' && lastError !== undefined) {
      causes.add(lastError)
    }
  }
  return causes
}

/** Adds events to a seq-ordered list, dropping repeats. */
export function mergeEvents(list: TraceEvent[], more: TraceEvent[]): TraceEvent[] {
  const seen = new Set(list.map((e) => e.seq))
  const out = list.slice()
  let sorted = true
  for (const e of more) {
    if (seen.has(e.seq)) continue
    seen.add(e.seq)
    if (out.length > 0 && out[out.length - 1].seq > e.seq) sorted = false
    out.push(e)
  }
  if (!sorted) out.sort((a, b) => a.seq - b.seq)
  return out
}
