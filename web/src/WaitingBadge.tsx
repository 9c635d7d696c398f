// A count of change sets waiting for review, on an agent in the list, on
// its Changes tab and on the Inbox link; nothing when none waits.

import { waitingLabel } from './review'

export function WaitingBadge({ n, title }: { n: number | undefined; title?: string }) {
  if (!n) return null
  return (
    <span className="waiting-badge" title={title ?? `${n} change set${n === 1 ? '' : 's'} waiting for review`}>
      <span aria-hidden="true">{n}</span>
      <span className="visually-hidden"> {waitingLabel(n)}</span>
    </span>
  )
}
