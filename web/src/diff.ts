// Parsing a unified diff (as GET /api/changes/{id} gives one per text
// entry) into lines with their kind and line numbers, for rendering.

export type DiffLineKind = 'add' | 'del' | 'context' | 'note'

export interface DiffLine {
  kind: DiffLineKind
  /** The line as written in the diff, its +, - or space prefix included. */
  text: string
  /** Line number in the old file (context and removed lines). */
  oldNo?: number
  /** Line number in the new file (context and added lines). */
  newNo?: number
}

export interface DiffHunk {
  /** The `@@ -a,b +c,d @@ ...` line. */
  header: string
  oldStart: number
  newStart: number
  lines: DiffLine[]
}

export interface ParsedDiff {
  oldFile?: string
  newFile?: string
  hunks: DiffHunk[]
  added: number
  removed: number
}

const hunkHeader = /^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@/

/** Parses a unified diff. Lines it does not understand are kept as notes, never dropped. */
export function parseUnifiedDiff(text: string): ParsedDiff {
  const out: ParsedDiff = { hunks: [], added: 0, removed: 0 }
  const lines = text.split('\n')
  // A diff ends with a newline: the last element is the empty rest.
  if (lines.length > 0 && lines[lines.length - 1] === '') lines.pop()
  let hunk: DiffHunk | null = null
  let oldNo = 0
  let newNo = 0
  for (const raw of lines) {
    const line = raw.endsWith('\r') ? raw.slice(0, -1) : raw
    const m = hunkHeader.exec(line)
    if (m) {
      oldNo = Number(m[1])
      newNo = Number(m[3])
      // An empty range starts "after" its line: -0,0 means nothing before line 1.
      if (m[2] === '0') oldNo += 1
      if (m[4] === '0') newNo += 1
      hunk = { header: line, oldStart: oldNo, newStart: newNo, lines: [] }
      out.hunks.push(hunk)
      continue
    }
    if (!hunk) {
      if (line.startsWith('--- ')) out.oldFile = stripTimestamp(line.slice(4))
      else if (line.startsWith('+++ ')) out.newFile = stripTimestamp(line.slice(4))
      continue
    }
    if (line.startsWith('+')) {
      hunk.lines.push({ kind: 'add', text: line, newNo: newNo++ })
      out.added++
    } else if (line.startsWith('-')) {
      hunk.lines.push({ kind: 'del', text: line, oldNo: oldNo++ })
      out.removed++
    } else if (line.startsWith(' ') || line === '') {
      // Some tools drop the space of an empty context line.
      hunk.lines.push({ kind: 'context', text: line === '' ? ' ' : line, oldNo: oldNo++, newNo: newNo++ })
    } else {
      // "\ No newline at end of file" and anything unexpected.
      hunk.lines.push({ kind: 'note', text: line })
    }
  }
  return out
}

function stripTimestamp(name: string): string {
  const tab = name.indexOf('\t')
  return tab >= 0 ? name.slice(0, tab) : name
}
