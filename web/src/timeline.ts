// Turning a run's trace events into timeline entries in words. The event
// data shapes are those internal/runner records (an agent CLI's transcript
// steps are internal/driver's Event).

import { driverInfo, isCLI, protocolName } from './drivers'
import { formatConfidence, formatScore, shortId } from './format'
import type { TraceEvent } from './types'

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
}

type Data = Record<string, unknown>

function str(v: unknown): string | undefined {
  return typeof v === 'string' && v !== '' ? v : undefined
}

function num(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isFinite(v) ? v : undefined
}

function plural(n: number, one: string, many = one + 's'): string {
  return `${n} ${n === 1 ? one : many}`
}

/** How much of one transcript step's text an entry shows: the server bounds it too, but a page stays readable whatever it is sent. */
export const maxStepText = 4096

function bounded(s: string | undefined): string | undefined {
  if (s === undefined || s.length <= maxStepText) return s
  return `${s.slice(0, maxStepText)}\n… (${plural(s.length - maxStepText, 'more character')})`
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

/**
 * A CLI tool call's arguments: any tool's `command` as the command (Codex's
 * command, Claude Code's Bash, OpenCode's bash), anything else as JSON.
 */
function describeStepArguments(raw: unknown): string | undefined {
  if (typeof raw !== 'string' || raw === '') return undefined
  try {
    const args: unknown = JSON.parse(raw)
    if (args && typeof args === 'object' && !Array.isArray(args) && typeof (args as Data).command === 'string') return `$ ${(args as Data).command}`
    return JSON.stringify(args, null, 2)
  } catch {
    return raw // cut at the server's bound, or not JSON
  }
}

/** One step an agent CLI reported of its work (a `transcript` event). */
function transcriptItem(base: Pick<TimelineItem, 'seq' | 'at' | 'type'>, d: Data): TimelineItem {
  const facts: string[] = []
  const name = str(d.name)
  const text = str(d.text)
  if (d.truncated === true) facts.push('cut')
  switch (d.kind) {
    case 'model': {
      const input = num(d.input_tokens)
      const output = num(d.output_tokens)
      // What the CLI believed it used; the budget is metered by the gateway.
      if (input !== undefined || output !== undefined) facts.push(`${input ?? 0} in, ${output ?? 0} out tokens, as the CLI counted`)
      return { ...base, title: 'CLI model turn', detail: bounded(text), facts, tone: 'model' }
    }
    case 'message':
      return { ...base, title: 'CLI message', detail: bounded(text), facts, tone: 'model' }
    case 'reasoning':
      return { ...base, title: 'CLI reasoning', detail: bounded(text), facts, tone: 'info' }
    case 'tool_call':
      return { ...base, title: `CLI tool call: ${name ?? 'tool'}`, detail: bounded(describeStepArguments(d.args)), facts, tone: 'tool' }
    case 'tool_result': {
      if (d.is_error === true) facts.push('failed')
      return { ...base, title: `CLI tool output: ${name ?? 'tool'}`, detail: bounded(text), facts, tone: d.is_error === true ? 'warn' : 'output' }
    }
    case 'error':
      return { ...base, title: 'CLI error', detail: bounded(text), facts, tone: 'warn' }
    case 'truncated': {
      const n = num(d.left_out)
      return { ...base, title: n !== undefined ? `CLI transcript cut: ${plural(n, 'more step')} left out` : 'CLI transcript cut', facts, tone: 'warn' }
    }
    default: {
      // A kind this page does not know: named, with what it said.
      const kind = str(d.kind) ?? 'step'
      return { ...base, title: `CLI ${kind}${name ? `: ${name}` : ''}`, detail: bounded(text), facts, tone: 'info' }
    }
  }
}

function runLink(id: string): { to: string; text: string } {
  return { to: `/runs/${encodeURIComponent(id)}`, text: `run ${shortId(id)}` }
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
export function toTimelineItem(ev: TraceEvent): TimelineItem {
  const d: Data = ev.data && typeof ev.data === 'object' ? ev.data : {}
  const base = { seq: ev.seq, at: ev.at, type: ev.type }
  const facts: string[] = []
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
      facts.push(model ? `model ${model}` : 'default model')
      if (str(d.fs)) facts.push(`workspace ${d.fs}`)
      if (str(d.changes)) facts.push(`changes: ${d.changes}`)
      return { ...base, title: 'Started', facts, tone: 'info' }
    }
    case 'message': {
      const calls = Array.isArray(d.tool_calls) ? (d.tool_calls as Data[]) : []
      const names = calls.map((c) => str(c?.name)).filter((n): n is string => !!n)
      if (names.length > 0) facts.push(`asks for ${names.join(', ')}`)
      if (str(d.model)) facts.push(`${d.model}`)
      return { ...base, title: 'Assistant', detail: str(d.content), facts, tone: 'model' }
    }
    case 'tool_call': {
      if (isCLICommand(d)) return { ...base, title: `${driverInfo(str(d.name)).label} started`, facts, tone: 'tool' }
      const name = str(d.name) ?? 'tool'
      return { ...base, title: `Tool call: ${name}`, detail: describeArguments(name, d.arguments), facts, tone: 'tool' }
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
      // The CLI's result carries the last lines it printed.
      const title = isCLICommand(d) ? `${driverInfo(name).label} ended` : `Tool output: ${name}`
      return { ...base, title, detail, facts, tone: failed ? 'warn' : 'output' }
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
      return transcriptItem(base, d)
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
      return { ...base, title: 'Paused: the token budget is spent', facts, tone: 'warn' }
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
      const agent = str(d.agent_id) ?? 'unknown'
      const child = str(d.run_id)
      const depth = num(d.depth)
      if (depth !== undefined) facts.push(`depth ${depth}`)
      return { ...base, title: `Delegated to agent ${agent}${child ? ':' : ''}`, facts, tone: 'tool', link: child ? runLink(child) : undefined }
    }
    case 'delegation_refused': {
      // A refused hop is the tool's error, never the run's end: a warning.
      const error = str(d.error) ?? 'refused'
      const cap = str(d.cap)
      const target = str(d.target)
      const creating = d.tool === 'create_agent'
      if (cap) facts.push(`cap: ${cap}`)
      if (target) facts.push(creating ? `name ${target}` : `agent ${target}`)
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

/** The events in order, each once (a reconnected stream repeats what it sent). */
export function toTimeline(events: TraceEvent[]): TimelineItem[] {
  return mergeEvents([], events).map(toTimelineItem)
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
