import { describe, expect, it } from 'vitest'
import { keepDiffs, selectable, tickedPaths } from './changes'
import type { ChangeEntry, ChangeSet } from './types'

function entry(path: string, more: Partial<ChangeEntry> = {}): ChangeEntry {
  return {
    path,
    path_escaped: path,
    op: 'create',
    old_sha256: '',
    new_sha256: `sha-${path}`,
    size: 1,
    mode: '-rw-r--r--',
    class: 'ordinary',
    flags: [],
    note: '',
    state: 'pending',
    ...more,
  }
}

function set(entries: ChangeEntry[]): ChangeSet {
  return {
    id: 'chg_1',
    run_id: null,
    agent_id: 'agt_1',
    status: 'pending',
    mode: 'review',
    entries,
    created_at: '',
    expires_at: '',
    decided_by: null,
    decided_at: null,
    disk_bytes: 0,
  }
}

describe('selectable', () => {
  const cases: { name: string; e: ChangeEntry; want: boolean }[] = [
    { name: 'pending ordinary', e: entry('a'), want: true },
    { name: 'pending risky', e: entry('a', { class: 'risky' }), want: true },
    { name: 'pending protected', e: entry('a', { class: 'protected' }), want: false },
    { name: 'applied', e: entry('a', { state: 'applied' }), want: false },
    { name: 'rejected', e: entry('a', { state: 'rejected' }), want: false },
    { name: 'denied', e: entry('a', { state: 'denied' }), want: false },
    { name: 'dropped', e: entry('a', { state: 'dropped' }), want: false },
    { name: 'conflicted', e: entry('a', { state: 'conflicted' }), want: false },
  ]
  for (const c of cases) {
    it(c.name, () => {
      expect(selectable(c.e)).toBe(c.want)
    })
  }
})

describe('tickedPaths', () => {
  it('keeps the set’s order and drops ticks on entries no longer open', () => {
    const cs = set([entry('a'), entry('b', { state: 'applied' }), entry('c'), entry('d', { class: 'protected' }), entry('e')])
    expect(tickedPaths(cs, new Set(['e', 'd', 'b', 'a', 'gone']))).toEqual(['a', 'e'])
  })
})

describe('keepDiffs', () => {
  const cases: { name: string; prev?: ChangeEntry; next: ChangeEntry; want: string | undefined }[] = [
    { name: 'answer without diff keeps the old one', prev: entry('a', { diff: 'old' }), next: entry('a', { state: 'applied' }), want: 'old' },
    { name: 'answer with a diff wins', prev: entry('a', { diff: 'old' }), next: entry('a', { diff: 'new' }), want: 'new' },
    {
      name: 'other content: the old diff is not kept',
      prev: entry('a', { diff: 'old' }),
      next: entry('a', { new_sha256: 'other' }),
      want: undefined,
    },
    { name: 'an entry not shown before', next: entry('a'), want: undefined },
  ]
  for (const c of cases) {
    it(c.name, () => {
      const got = keepDiffs(set([c.next]), set(c.prev ? [c.prev] : []))
      expect(got.entries[0].diff).toBe(c.want)
    })
  }
  it('passes the answer through without a set before', () => {
    const next = set([entry('a')])
    expect(keepDiffs(next, undefined)).toBe(next)
  })
})
