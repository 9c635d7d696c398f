import { describe, expect, it } from 'vitest'
import { actions, can, canStop, isActive, levels, type Action } from './permissions'
import type { Level } from './types'

// Every action × level pair is listed; a new action without its row fails
// the completeness test below.
const allowed: Record<Action, Level[]> = {
  view: ['viewer', 'runner', 'editor', 'owner'],
  send: ['runner', 'editor', 'owner'],
  stopOwnRun: ['runner', 'editor', 'owner'],
  stopAnyRun: ['editor', 'owner'],
  kill: ['editor', 'owner'],
  editSettings: ['editor', 'owner'],
  decideChanges: ['editor', 'owner'],
  editFiles: ['editor', 'owner'],
  editDocuments: ['editor', 'owner'],
  setRepository: ['editor', 'owner'],
  push: ['editor', 'owner'],
  setBudget: ['owner'],
  share: ['owner'],
  release: ['owner'],
  delete: ['owner'],
}

describe('can', () => {
  it('covers every action', () => {
    expect(Object.keys(allowed).sort()).toEqual([...actions].sort())
  })
  for (const action of actions) {
    for (const level of levels) {
      const want = allowed[action].includes(level)
      it(`can(${level}, ${action}) = ${want}`, () => {
        expect(can(level, action)).toBe(want)
      })
    }
  }
  it('refuses an unknown or missing level', () => {
    expect(can(undefined, 'view')).toBe(false)
    expect(can('admin' as Level, 'view')).toBe(false)
  })
})

describe('canStop', () => {
  const me = { id: 'usr_me' }
  const mine = { triggered_by: { id: 'usr_me', name: 'Me' } }
  const theirs = { triggered_by: { id: 'usr_other', name: 'Other' } }
  const orphan = { triggered_by: null }
  const cases: { name: string; level: Level; run: typeof mine | typeof orphan; want: boolean }[] = [
    { name: 'viewer, own run', level: 'viewer', run: mine, want: false },
    { name: 'runner, own run', level: 'runner', run: mine, want: true },
    { name: 'runner, someone else’s run', level: 'runner', run: theirs, want: false },
    { name: 'runner, run of a deleted account', level: 'runner', run: orphan, want: false },
    { name: 'editor, someone else’s run', level: 'editor', run: theirs, want: true },
    { name: 'owner, someone else’s run', level: 'owner', run: theirs, want: true },
  ]
  for (const c of cases) {
    it(c.name, () => expect(canStop(c.level, c.run, me)).toBe(c.want))
  }
  it('needs a signed-in user for a runner', () => expect(canStop('runner', mine, null)).toBe(false))
})

describe('isActive', () => {
  const cases: [string, boolean][] = [
    ['admitted', true],
    ['running', true],
    ['paused', true],
    ['completed', false],
    ['cancelled', false],
    ['killed', false],
    ['errored', false],
    ['reconciled', false],
  ]
  for (const [status, want] of cases) it(`isActive(${status}) = ${want}`, () => expect(isActive(status)).toBe(want))
})
