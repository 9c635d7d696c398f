// Turning a run's trace events into timeline entries in words. The event
// data shapes are those internal/runner records.

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
      return { ...base, title: `Tool output: ${name}`, detail, facts, tone: failed ? 'warn' : 'output' }
    }
    case 'usage': {
      const input = num(d.input) ?? 0
      const output = num(d.output) ?? 0
      const b = budgetFact(d)
      if (b) facts.push(b)
      return { ...base, title: `Tokens: ${input} in, ${output} out`, facts, tone: 'info' }
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
