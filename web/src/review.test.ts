import { describe, expect, it } from 'vitest'
import { newestWaiting, pendingFiles, waitingLabel, waitingWords } from './review'
import type { ChangeEntry, ChangeSet, ChangeStatus } from './types'

function entry(path: string, state: ChangeEntry['state']): ChangeEntry {
  return { path, path_escaped: path, op: 'create', old_sha256: '', new_sha256: 'aa', size: 1, mode: '-rw-r--r--', class: 'ordinary', flags: [], note: '', state }
}

function set(id: string, status: ChangeStatus, ...states: ChangeEntry['state'][]): ChangeSet {
  return {
    id, run_id: null, agent_id: 'agt_1', status, mode: 'review', entries: states.map((s, i) => entry(`f${i}.txt`, s)),
    created_at: '2025-01-01T00:00:00Z', expires_at: '2025-01-08T00:00:00Z', decided_by: null, decided_at: null, disk_bytes: 0,
  }
}

describe('pendingFiles', () => {
  it('counts only the entries still waiting', () => {
    expect(pendingFiles(set('c', 'pending', 'pending', 'applied', 'pending', 'denied'))).toBe(2)
  })
})

describe('newestWaiting', () => {
  const cases: { name: string; changes: ChangeSet[] | undefined; want: { id: string; files: number; others: number } | null }[] = [
    { name: 'nothing loaded', changes: undefined, want: null },
    { name: 'nothing waits', changes: [set('a', 'applied', 'applied'), set('b', 'rejected', 'rejected')], want: null },
    { name: 'the newest waiting, decided ones skipped', changes: [set('a', 'applied', 'applied'), set('b', 'pending', 'pending', 'pending'), set('c', 'pending', 'pending')], want: { id: 'b', files: 2, others: 1 } },
    { name: 'half decided still waits', changes: [set('a', 'pending', 'applied', 'pending')], want: { id: 'a', files: 1, others: 0 } },
  ]
  for (const c of cases) {
    it(c.name, () => {
      const got = newestWaiting(c.changes)
      expect(got && { id: got.set.id, files: got.files, others: got.others }).toEqual(c.want)
    })
  }
})

describe('waitingWords', () => {
  const cases: { files: number; canDecide: boolean; want: string }[] = [
    { files: 2, canDecide: true, want: '2 files wait for your review' },
    { files: 1, canDecide: true, want: '1 file waits for your review' },
    { files: 3, canDecide: false, want: '3 files wait for review by an editor or the owner' },
  ]
  for (const c of cases) it(`${c.files} files, ${c.canDecide ? 'mine' : 'not mine'} to decide`, () => expect(waitingWords(c.files, c.canDecide)).toBe(c.want))
})

describe('waitingLabel', () => {
  it('reads after its label', () => expect(waitingLabel(2)).toBe('(2 waiting)'))
})
