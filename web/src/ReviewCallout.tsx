// On the conversation, once a run has left a change set: how many files
// wait, for whom, and a link straight to the change set.

import { newestWaiting, waitingWords } from './review'
import { Link } from './router'
import type { Agent, ChangeSet } from './types'

export function ReviewCallout({ agent, changes }: { agent: Agent; changes: ChangeSet[] | undefined }) {
  const w = newestWaiting(changes)
  if (!w) return null
  const canDecide = agent.can.includes('decide_changes')
  const base = `/agents/${encodeURIComponent(agent.id)}`
  return (
    <div className="banner warn review-callout" role="region" aria-label="Waiting for review">
      <p>
        <strong>{waitingWords(w.files, canDecide)}.</strong>{' '}
        <Link to={`/changes/${encodeURIComponent(w.set.id)}`}>{canDecide ? 'Review the change set' : 'See the change set'}</Link>
        {w.others > 0 && (
          <>
            {' · '}
            <Link to={`${base}?tab=changes`}>
              {w.others} more change set{w.others === 1 ? '' : 's'} waiting
            </Link>
          </>
        )}
      </p>
    </div>
  )
}
