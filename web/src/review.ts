// Where work waits for a person, in words: the call to action after a run,
// the counts on agents, their Changes tab and the inbox. Pure, but for
// inboxStale, the one signal that a count may have moved.

import type { ChangeSet } from './types'

/** The window event on which the header asks its Inbox count again. */
export const inboxStaleEvent = 'corral:inbox-stale'

/** Says that what waits for review may have changed: a run left a change set, or one was decided. */
export function inboxStale(): void {
  window.dispatchEvent(new Event(inboxStaleEvent))
}

/** How many of a change set's entries (files) still wait for a decision. */
export function pendingFiles(cs: ChangeSet): number {
  return cs.entries.filter((e) => e.state === 'pending').length
}

/**
 * The change set a person should look at first: the newest that waits (the
 * list comes newest first), with how many others wait besides; null when
 * nothing waits.
 */
export function newestWaiting(changes: ChangeSet[] | undefined): { set: ChangeSet; files: number; others: number } | null {
  const waiting = (changes ?? []).filter((c) => c.status === 'pending')
  if (waiting.length === 0) return null
  return { set: waiting[0], files: pendingFiles(waiting[0]), others: waiting.length - 1 }
}

/**
 * "2 files wait for your review" to someone who may decide them, or for
 * "an editor's review" to someone who may not.
 */
export function waitingWords(files: number, canDecide: boolean): string {
  const what = files === 1 ? '1 file waits' : `${files} files wait`
  return `${what} for ${canDecide ? 'your review' : 'review by an editor or the owner'}`
}

/** What a count badge says to a screen reader, after the label it sits on. */
export function waitingLabel(n: number): string {
  return `(${n} waiting)`
}
