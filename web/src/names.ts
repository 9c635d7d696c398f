// How a file name an agent wrote is shown. A name can carry a newline, a
// terminal escape or a right-to-left override that makes it read as
// something else; the server sends each change entry's name escaped
// (path_escaped) beside the raw one, and an entry whose two differ is shown
// only escaped, marked as unusual.

/** What to show for one name, and whether it needed escaping. */
export interface ShownName {
  text: string
  unusual: boolean
}

/**
 * The name to show for an entry. When path_escaped differs from path the
 * escaped one is shown. The raw path is escaped here as well when the server
 * sent no path_escaped, or sent one equal to a path that still holds a
 * character that is not safe to print: showing the raw name is never the
 * fallback. An entry flagged `name` (it breaks a name rule) is unusual even
 * when the server already sends its path escaped, and so equal.
 */
export function shownName(e: { path: string; path_escaped?: string; flags?: readonly string[] }): ShownName {
  const flagged = e.flags?.includes('name') ?? false
  const escaped = typeof e.path_escaped === 'string' && e.path_escaped !== '' ? e.path_escaped : undefined
  if (escaped !== undefined && escaped !== e.path) return { text: escaped, unusual: true }
  // Equal, and all printable: already the server's escaped form (escaping
  // it again would double its backslashes).
  if (escaped !== undefined && printsAsIs(escaped)) return { text: escaped, unusual: flagged }
  const local = escapeName(e.path)
  return { text: local, unusual: flagged || local !== e.path }
}

// Letters, marks, numbers, punctuation, symbols and the ASCII space print as
// themselves (Go's strconv.IsPrint); anything else is escaped, and so is a
// backslash, so that an escape sequence in a name cannot pass for one of ours.
// This is the server's rule (internal/sanitize.Escape), kept here only for an
// answer without path_escaped: the server's escaping is the one shown.
const printable = /^[\p{L}\p{M}\p{N}\p{P}\p{S} ]$/u

function printsAsIs(s: string): boolean {
  for (const ch of s) if (!printable.test(ch)) return false
  return true
}

const named: Record<string, string> = {
  '\x07': '\\a',
  '\b': '\\b',
  '\f': '\\f',
  '\n': '\\n',
  '\r': '\\r',
  '\t': '\\t',
  '\v': '\\v',
  '\\': '\\\\',
}

/** Escapes s Go-style (`\n`, `\x1b`, `\u202e`, `\U0001f600`), without quotes. */
export function escapeName(s: string): string {
  let out = ''
  for (const ch of s) {
    if (named[ch] !== undefined) {
      out += named[ch]
      continue
    }
    if (printable.test(ch)) {
      out += ch
      continue
    }
    const cp = ch.codePointAt(0)!
    if (cp < 0x80) out += `\\x${hex(cp, 2)}`
    else if (cp < 0x10000) out += `\\u${hex(cp, 4)}`
    else out += `\\U${hex(cp, 8)}`
  }
  return out
}

function hex(n: number, width: number): string {
  return n.toString(16).padStart(width, '0')
}
