// What the app decides about a run on its own: whether it is still going,
// and whether to offer the caller its Stop button. What the caller may do
// comes from the server (`agent.can`); this only combines it with the run.

import type { Can, Run, User } from './types'

/** Whether the caller may stop this run: anyone's with stop_any_run, their own with stop_own_run. */
export function canStop(can: Readonly<Can> | undefined, run: Pick<Run, 'triggered_by'>, me: Pick<User, 'id'> | null): boolean {
  if (!can) return false
  if (can.includes('stop_any_run')) return true
  return can.includes('stop_own_run') && me !== null && run.triggered_by?.id === me.id
}

const activeStatuses = new Set(['admitted', 'running', 'paused'])

/** Whether a run has not ended yet. */
export function isActive(status: string): boolean {
  return activeStatuses.has(status)
}
