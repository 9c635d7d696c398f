// What each level may do, so the UI offers only what the server would
// allow. The server decides; this only keeps doomed controls off the page.
// Levels: viewer < runner < editor < owner.

import type { Level, Run, User } from './types'

export type Action =
  | 'view' // the agent, its conversation, runs, traces, change sets, files, documents (and searching them)
  | 'send' // post a message, which starts a run
  | 'stopOwnRun'
  | 'stopAnyRun'
  | 'kill'
  | 'editSettings' // instructions, model, policy, limits
  | 'decideChanges' // approve or reject a change set
  | 'editFiles' // delete files, import an archive into the workspace
  | 'editDocuments' // upload and delete the agent's private documents
  | 'setRepository' // clone a git repository into the workspace
  | 'push' // push the commits applied change sets made
  | 'setBudget'
  | 'share' // grants and links
  | 'release' // lift a quarantine
  | 'delete'

export const levels: readonly Level[] = ['viewer', 'runner', 'editor', 'owner']

/** The lowest level allowed each action. */
const minimum: Record<Action, Level> = {
  view: 'viewer',
  send: 'runner',
  stopOwnRun: 'runner',
  stopAnyRun: 'editor',
  kill: 'editor',
  editSettings: 'editor',
  decideChanges: 'editor',
  editFiles: 'editor',
  editDocuments: 'editor',
  setRepository: 'editor',
  push: 'editor',
  setBudget: 'owner',
  share: 'owner',
  release: 'owner',
  delete: 'owner',
}

export const actions = Object.keys(minimum) as Action[]

export function rank(level: Level): number {
  return levels.indexOf(level)
}

/** Whether a caller at level may do action. */
export function can(level: Level | undefined, action: Action): boolean {
  if (!level || rank(level) < 0) return false
  return rank(level) >= rank(minimum[action])
}

/** Whether the caller may stop this run: their own as runner, anyone's as editor. */
export function canStop(level: Level | undefined, run: Pick<Run, 'triggered_by'>, me: Pick<User, 'id'> | null): boolean {
  if (can(level, 'stopAnyRun')) return true
  return can(level, 'stopOwnRun') && me !== null && run.triggered_by?.id === me.id
}

const activeStatuses = new Set(['admitted', 'running', 'paused'])

/** Whether a run has not ended yet. */
export function isActive(status: string): boolean {
  return activeStatuses.has(status)
}
