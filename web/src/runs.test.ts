import { describe, expect, it } from 'vitest'
import { canStop, isActive } from './runs'
import type { Can } from './types'

describe('canStop', () => {
  const me = { id: 'usr_me' }
  const mine = { triggered_by: { id: 'usr_me', name: 'Me' } }
  const theirs = { triggered_by: { id: 'usr_other', name: 'Other' } }
  const orphan = { triggered_by: null }
  const none: Can = ['view_runs']
  const own: Can = ['view_runs', 'stop_own_run']
  const any: Can = ['view_runs', 'stop_own_run', 'stop_any_run']
  const cases: { name: string; can: Can; run: typeof mine | typeof orphan; want: boolean }[] = [
    { name: 'may stop nothing, own run', can: none, run: mine, want: false },
    { name: 'may stop own runs, own run', can: own, run: mine, want: true },
    { name: 'may stop own runs, someone else’s run', can: own, run: theirs, want: false },
    { name: 'may stop own runs, run of a deleted account', can: own, run: orphan, want: false },
    { name: 'may stop any run, someone else’s run', can: any, run: theirs, want: true },
    { name: 'may stop any run, run of a deleted account', can: any, run: orphan, want: true },
  ]
  for (const c of cases) {
    it(c.name, () => expect(canStop(c.can, c.run, me)).toBe(c.want))
  }
  it('needs a signed-in user to stop an own run', () => expect(canStop(own, mine, null)).toBe(false))
  it('refuses when the agent is not loaded', () => expect(canStop(undefined, mine, me)).toBe(false))
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
