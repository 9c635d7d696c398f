import { formatClock } from './format'
import { Markdown } from './Markdown'
import { AllowHostButton, type HostAllower } from './Network'
import { Link } from './router'
import type { TimelineItem } from './timeline'

/**
 * A run's trace as a list of what happened, in order. With allower (for
 * those who may edit the agent), a refused request offers to allow its host.
 */
export function Timeline({ items, label, allower }: { items: TimelineItem[]; label: string; allower?: HostAllower }) {
  if (items.length === 0) return <p className="muted">Nothing has happened yet.</p>
  return (
    <ol className="timeline" aria-label={label}>
      {items.map((it) => (
        <li key={it.seq} className={`tl tl-${it.tone} tl-type-${it.type}`}>
          <div className="tl-head">
            <span className="tl-title">{it.title}</span>
            {it.link && (
              <Link to={it.link.to} className="tl-link">
                {it.link.text}
              </Link>
            )}
            {it.facts.length > 0 && <span className="tl-facts">{it.facts.join(' · ')}</span>}
            <time dateTime={it.at} className="tl-time">
              {formatClock(it.at)}
            </time>
          </div>
          {it.detail && <pre className="tl-detail">{it.detail}</pre>}
          {it.markdown && <Markdown text={it.markdown} className="tl-markdown" />}
          {it.fold && (
            <details className="tl-fold">
              <summary>{it.fold.summary}</summary>
              <pre className="tl-detail">{it.fold.text}</pre>
            </details>
          )}
          {it.refused && allower && <AllowHostButton host={it.refused.host} port={it.refused.port} allower={allower} />}
        </li>
      ))}
    </ol>
  )
}
