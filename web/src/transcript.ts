// An agent CLI's run read as steps: the `transcript` events internal/driver
// makes of what Codex, Claude Code and OpenCode report (a command run and
// how it ended, a file edited, the model's message, a tool used with its
// output folded), their warnings as warnings, and what the CLI printed
// besides its JSON events. Pure: timeline.ts builds the run's timeline
// with these.

export type Data = Record<string, unknown>

export function str(v: unknown): string | undefined {
  return typeof v === 'string' && v !== '' ? v : undefined
}

export function num(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isFinite(v) ? v : undefined
}

export function plural(n: number, one: string, many = one + 's'): string {
  return `${n} ${n === 1 ? one : many}`
}

/** How much of one step's text is shown: the server bounds it too, but a page stays readable whatever it is sent. */
export const maxStepText = 4096

export function bounded(s: string | undefined): string | undefined {
  if (s === undefined || s.length <= maxStepText) return s
  return `${s.slice(0, maxStepText)}\n… (${plural(s.length - maxStepText, 'more character')})`
}

/** Text shown folded, opened by a click: a command's output, a file's new content. */
export interface Fold {
  summary: string
  text: string
}

/** One step of a CLI's work, in words (a timeline entry's own part). */
export interface Step {
  title: string
  /** Shown under the title, monospaced: the command, the paths. */
  detail?: string
  /** The model's words: shown as Markdown. */
  markdown?: string
  fold?: Fold
  facts: string[]
  tone: 'info' | 'tool' | 'output' | 'model' | 'good' | 'warn' | 'bad'
}

/** Where the CLIs see the workspace: paths under it are shown relative. */
const workspace = '/workspace/'

function shortPath(p: string): string {
  return p.startsWith(workspace) ? p.slice(workspace.length) || '.' : p
}

function lines(s: string): number {
  return s === '' ? 0 : s.replace(/\n$/, '').split('\n').length
}

function foldOf(what: string, text: string | undefined): Fold | undefined {
  if (text === undefined || text.trim() === '') return undefined
  return { summary: `${what} (${plural(lines(text), 'line')})`, text: bounded(text) ?? '' }
}

/**
 * A shell command as a person would type it: Codex runs each one as
 * `/bin/bash -lc '<command>'`, which says nothing; the inside is shown.
 */
export function unwrapShell(cmd: string): string {
  const m = /^(?:\/(?:usr\/)?bin\/)?(?:ba|z)?sh -l?c '((?:[^']|'\\'')*)'$/.exec(cmd.trim())
  return m ? m[1].replace(/'\\''/g, "'") : cmd
}

function parseArgs(raw: unknown): { args?: Data; raw?: string } {
  if (typeof raw !== 'string' || raw === '') return {}
  try {
    const v: unknown = JSON.parse(raw)
    if (v && typeof v === 'object' && !Array.isArray(v)) return { args: v as Data, raw }
    return { raw }
  } catch {
    return { raw } // cut at the server's bound, or not JSON
  }
}

/** What kind of tool a CLI's tool name is, across the three CLIs' names. */
type ToolKind = 'command' | 'edit' | 'write' | 'patch' | 'read' | 'search' | 'plan' | 'other'

const toolKinds: Record<string, ToolKind> = {
  command: 'command', // Codex
  bash: 'command', // Claude Code's Bash, OpenCode's bash
  shell: 'command',
  edit: 'edit', // Claude Code's Edit, OpenCode's edit
  multiedit: 'edit',
  write: 'write',
  file_change: 'patch', // Codex
  patch: 'patch',
  apply_patch: 'patch',
  read: 'read',
  grep: 'search',
  glob: 'search',
  list: 'search',
  ls: 'search',
  web_search: 'search',
  websearch: 'search',
  todo_list: 'plan',
  todowrite: 'plan',
}

function toolKind(name: string | undefined): ToolKind {
  return (name && toolKinds[name.toLowerCase()]) || 'other'
}

/** How a tool call ended, as facts and a tone; undefined result: not (yet) answered. */
function ending(result: Data | undefined, ok: string): { facts: string[]; failed: boolean } {
  if (!result) return { facts: [], failed: false }
  const failed = result.is_error === true
  return { facts: [failed ? 'failed' : ok], failed }
}

/** The files a Codex file_change names: [{"path", "kind"}]. */
function changedFiles(raw: string | undefined): string[] | undefined {
  if (!raw) return undefined
  try {
    const v: unknown = JSON.parse(raw)
    if (!Array.isArray(v)) return undefined
    const words: Record<string, string> = { add: 'added', delete: 'deleted', update: 'changed' }
    return v
      .filter((c): c is Data => !!c && typeof c === 'object' && typeof (c as Data).path === 'string')
      .map((c) => `${words[String(c.kind)] ?? String(c.kind ?? 'changed')} ${shortPath(String(c.path))}`)
  } catch {
    return undefined
  }
}

/**
 * A tool call of a CLI and, when it has come, its result, as one step: a
 * command with how it ended and its output folded, a file edit with what
 * changed, anything else by its name with its arguments.
 */
export function toolStep(call: Data, result?: Data): Step {
  const name = str(call.name)
  const { args, raw } = parseArgs(call.args)
  const facts: string[] = []
  if (call.truncated === true || result?.truncated === true) facts.push('cut')
  const out = str(result?.text)
  const path = args && (str(args.file_path) ?? str(args.filePath) ?? str(args.path))
  switch (toolKind(name)) {
    case 'command': {
      const command = args && str(args.command)
      if (command) {
        const desc = str(args?.description)
        const end = ending(result, 'succeeded')
        return {
          title: desc ? `Ran a command: ${desc}` : 'Ran a command',
          detail: bounded(`$ ${unwrapShell(command)}`),
          fold: foldOf('Output', out),
          facts: [...end.facts, ...facts],
          tone: end.failed ? 'warn' : 'tool',
        }
      }
      break
    }
    case 'edit':
    case 'write': {
      if (path) {
        const end = ending(result, 'done')
        const writing = toolKind(name) === 'write'
        const content = str(args?.content)
        const before = str(args?.old_string) ?? str(args?.oldString)
        const after = str(args?.new_string) ?? str(args?.newString)
        let fold: Fold | undefined
        if (writing && content !== undefined) fold = foldOf('New content', content)
        else if (before !== undefined || after !== undefined) {
          const diff = [...(before ?? '').split('\n').map((l) => `- ${l}`), ...(after ?? '').split('\n').map((l) => `+ ${l}`)].join('\n')
          fold = { summary: 'The change', text: bounded(diff) ?? '' }
        }
        if (end.failed) fold = foldOf('Why it failed', out) ?? fold
        return {
          title: `${writing ? 'Wrote' : 'Edited'} ${shortPath(path)}`,
          fold,
          facts: [...end.facts, ...facts],
          tone: end.failed ? 'warn' : 'tool',
        }
      }
      break
    }
    case 'patch': {
      const files = changedFiles(raw)
      const end = ending(result, 'done')
      return {
        title: files && files.length > 0 ? `Edited ${plural(files.length, 'file')}` : 'Edited files',
        detail: files && files.length > 0 ? files.join('\n') : bounded(raw),
        facts: [...end.facts, ...facts],
        tone: end.failed ? 'warn' : 'tool',
      }
    }
    case 'read': {
      if (path) {
        const end = ending(result, 'done')
        return { title: `Read ${shortPath(path)}`, fold: foldOf('What it read', out), facts: [...end.facts, ...facts], tone: end.failed ? 'warn' : 'tool' }
      }
      break
    }
    case 'search': {
      const what = args && (str(args.pattern) ?? str(args.query) ?? str(args.path))
      if (what) {
        const end = ending(result, 'done')
        return { title: `Searched for ${what}`, fold: foldOf('Found', out), facts: [...end.facts, ...facts], tone: end.failed ? 'warn' : 'tool' }
      }
      break
    }
    case 'plan': {
      const end = ending(result, 'done')
      return { title: 'Updated its plan', fold: foldOf('The plan', raw && pretty(raw)), facts: [...end.facts, ...facts], tone: 'info' }
    }
  }
  // Any other tool (an MCP tool such as Corral's delegate): named, with its
  // arguments as the CLI gave them.
  const end = ending(result, 'done')
  const shown = args ? JSON.stringify(args, null, 2) : raw
  return {
    title: `Used ${name ?? 'a tool'}`,
    detail: bounded(shown === '{}' ? undefined : shown),
    fold: foldOf(end.failed ? 'Why it failed' : 'Result', out),
    facts: [...end.facts, ...facts],
    tone: end.failed ? 'warn' : 'tool',
  }
}

/** JSON indented for reading, or the text as it is when it is not JSON. */
function pretty(raw: string): string {
  try {
    return JSON.stringify(JSON.parse(raw), null, 2)
  } catch {
    return raw
  }
}

/**
 * One transcript event that is not a tool call (those are toolStep's):
 * the model's message and turns, its reasoning, a tool result whose call
 * is not in the trace, a warning, the transcript cut. failed says the CLI
 * failed and this error is why: then it reads as an error, else a warning.
 */
export function transcriptStep(d: Data, failed = false): Step {
  const facts: string[] = []
  const text = str(d.text)
  if (d.truncated === true) facts.push('cut')
  switch (d.kind) {
    case 'model': {
      const input = num(d.input_tokens)
      const output = num(d.output_tokens)
      // What the CLI believed it used; the budget is metered by the gateway.
      if (input !== undefined || output !== undefined) facts.push(`${input ?? 0} in, ${output ?? 0} out tokens, as the CLI counted`)
      return { title: 'Model turn', facts, tone: 'info' }
    }
    case 'message':
      return { title: 'Message', markdown: bounded(text), facts, tone: 'model' }
    case 'reasoning':
      return { title: 'Thinking', fold: foldOf('What it thought', text), facts, tone: 'info' }
    case 'tool_call':
      return toolStep(d)
    case 'tool_result': {
      // Its call is not in the trace (cut, or before a restart).
      const bad = d.is_error === true
      if (bad) facts.push('failed')
      return { title: `Result of ${str(d.name) ?? 'a tool'}`, fold: foldOf('Output', text), facts, tone: bad ? 'warn' : 'output' }
    }
    case 'error':
      return failed
        ? { title: 'CLI error', detail: bounded(text), facts, tone: 'bad' }
        : { title: 'CLI warning', detail: bounded(text), facts, tone: 'warn' }
    case 'truncated': {
      const n = num(d.left_out)
      return { title: n !== undefined ? `Transcript cut: ${plural(n, 'more step')} left out` : 'Transcript cut', detail: str(d.note), facts, tone: 'warn' }
    }
    default: {
      // A kind this page does not know: named, with what it said.
      const kind = str(d.kind) ?? 'step'
      const name = str(d.name)
      return { title: `CLI ${kind}${name ? `: ${name}` : ''}`, detail: bounded(text), facts, tone: 'info' }
    }
  }
}

/**
 * What a CLI printed besides its JSON events: its stderr warnings ("WARNING:
 * proceeding…", "Reading additional input from stdin..."), each line once
 * in order. The events are in the transcript already; a warning that ran
 * into an event keeps its part before the event.
 */
export function printedLines(output: string): string[] {
  const out: string[] = []
  for (const raw of output.split('\n')) {
    let line = raw.trim()
    if (line === '') continue
    const brace = line.indexOf('{')
    if (brace >= 0 && isJSON(line.slice(brace))) line = line.slice(0, brace).trim()
    else if (line.endsWith('}') && line.includes('":')) continue // an event cut at the tail's start
    if (line !== '') out.push(line)
  }
  return out
}

function isJSON(s: string): boolean {
  try {
    JSON.parse(s)
    return true
  } catch {
    return false
  }
}
