// The pure part of deciding a change set entry by entry: which entries a
// person may tick, which ticks still count, and keeping diffs across a
// decision's answer.

import type { ChangeEntry, ChangeSet } from './types'

/** Whether a person may tick this entry: it waits for a decision and policy allows applying it. */
export function selectable(e: ChangeEntry): boolean {
  return e.state === 'pending' && e.class !== 'protected'
}

/**
 * The paths to send for the ticked entries, in the set's order. Only entries
 * still open count: a tick left on one decided meanwhile (by someone else, or
 * turned `conflicted`) is never sent.
 */
export function tickedPaths(cs: ChangeSet, ticked: ReadonlySet<string>): string[] {
  return cs.entries.filter((e) => selectable(e) && ticked.has(e.path)).map((e) => e.path)
}

/**
 * The set a decision answered, with each entry's diff kept from the set shown
 * before when the answer carries none and the content is the same: the
 * decision endpoints need not send diffs, and a click should not lose them.
 */
export function keepDiffs(next: ChangeSet, prev: ChangeSet | undefined): ChangeSet {
  if (!prev) return next
  const before = new Map(prev.entries.map((e) => [e.path, e]))
  return {
    ...next,
    entries: next.entries.map((e) => {
      const old = before.get(e.path)
      if (e.diff !== undefined || old?.diff === undefined || old.new_sha256 !== e.new_sha256) return e
      return { ...e, diff: old.diff }
    }),
  }
}
