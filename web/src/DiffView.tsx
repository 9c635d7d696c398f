import { parseUnifiedDiff, type DiffLine } from './diff'

const kindLabel: Record<DiffLine['kind'], string> = {
  add: 'added',
  del: 'removed',
  context: 'unchanged',
  note: 'note',
}

/** A unified diff with added and removed lines coloured and numbered. */
export function DiffView({ diff, label }: { diff: string; label: string }) {
  const parsed = parseUnifiedDiff(diff)
  if (parsed.hunks.length === 0) {
    return <p className="muted">No textual difference.</p>
  }
  return (
    <div className="diff" role="group" aria-label={label}>
      <p className="diff-summary">
        <span className="diff-count add">+{parsed.added}</span> <span className="diff-count del">−{parsed.removed}</span>
      </p>
      {parsed.hunks.map((h, i) => (
        <div className="diff-hunk" key={i}>
          <div className="diff-hunk-header">{h.header}</div>
          {h.lines.map((l, j) => (
            <div className={`diff-line ${l.kind}`} key={j} title={kindLabel[l.kind]}>
              <span className="ln" aria-hidden="true">
                {l.oldNo ?? ''}
              </span>
              <span className="ln" aria-hidden="true">
                {l.newNo ?? ''}
              </span>
              <code>{l.text}</code>
            </div>
          ))}
        </div>
      ))}
    </div>
  )
}
