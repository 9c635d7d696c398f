import { describe, expect, it } from 'vitest'
import type { Limits, LimitsInfo } from './types'
import { defaultWords, exactUnit, formatLimit, fromHuman, limitFields, toHuman, type HumanValue, type LimitKind } from './units'

describe('toHuman', () => {
  const cases: { name: string; kind: LimitKind; n: number; want: { value: string; unit: string } }[] = [
    { name: '0 is an empty field (the default)', kind: 'bytes', n: 0, want: { value: '', unit: 'MiB' } },
    { name: 'memory in MiB', kind: 'bytes', n: 512 * 1024 ** 2, want: { value: '512', unit: 'MiB' } },
    { name: 'a whole GiB', kind: 'bytes', n: 2 * 1024 ** 3, want: { value: '2', unit: 'GiB' } },
    { name: '1.5 GiB stays exact in MiB', kind: 'bytes', n: 1536 * 1024 ** 2, want: { value: '1536', unit: 'MiB' } },
    { name: 'an odd byte count stays in bytes', kind: 'bytes', n: 1000, want: { value: '1000', unit: 'bytes' } },
    { name: 'seconds to minutes', kind: 'seconds', n: 1800, want: { value: '30', unit: 'minutes' } },
    { name: 'seconds that are not minutes', kind: 'seconds', n: 90, want: { value: '90', unit: 'seconds' } },
    { name: 'a day', kind: 'seconds', n: 86400, want: { value: '1', unit: 'days' } },
    { name: 'CPU milliseconds to minutes', kind: 'millis', n: 1_800_000, want: { value: '30', unit: 'minutes' } },
    { name: 'CPU milliseconds that are not seconds', kind: 'millis', n: 1500, want: { value: '1.5', unit: 'seconds' } },
    { name: 'an empty CPU field', kind: 'millis', n: 0, want: { value: '', unit: 'minutes' } },
    { name: 'a count', kind: 'count', n: 128, want: { value: '128', unit: '' } },
  ]
  for (const c of cases) it(c.name, () => expect(toHuman(c.kind, c.n)).toEqual(c.want))
})

describe('fromHuman', () => {
  const cases: { name: string; kind: LimitKind; value: string; unit: string; want: number | RegExp }[] = [
    { name: 'empty is the default', kind: 'bytes', value: ' ', unit: 'MiB', want: 0 },
    { name: 'MiB to bytes', kind: 'bytes', value: '512', unit: 'MiB', want: 536870912 },
    { name: 'a fraction of a GiB', kind: 'bytes', value: '1.5', unit: 'GiB', want: 1610612736 },
    { name: 'KiB', kind: 'bytes', value: '256', unit: 'KiB', want: 262144 },
    { name: 'minutes to seconds', kind: 'seconds', value: '30', unit: 'minutes', want: 1800 },
    { name: 'hours to seconds', kind: 'seconds', value: '2', unit: 'hours', want: 7200 },
    { name: 'CPU minutes to milliseconds', kind: 'millis', value: '10', unit: 'minutes', want: 600_000 },
    { name: 'CPU seconds with a fraction', kind: 'millis', value: '0.25', unit: 'seconds', want: 250 },
    { name: 'a count', kind: 'count', value: '100000', unit: '', want: 100000 },
    { name: 'a fractional count', kind: 'count', value: '1.5', unit: '', want: /whole number/ },
    { name: 'a negative number', kind: 'bytes', value: '-1', unit: 'MiB', want: /must be a number/ },
    { name: 'words', kind: 'seconds', value: 'ten', unit: 'minutes', want: /must be a number/ },
    { name: 'a unit of another kind', kind: 'seconds', value: '1', unit: 'MiB', want: /not a unit/ },
    { name: 'less than a byte', kind: 'bytes', value: '0.0001', unit: 'bytes', want: /less than one byte/ },
    { name: 'too large to be exact', kind: 'bytes', value: '99999999', unit: 'TiB', want: /too large/ },
  ]
  for (const c of cases) {
    it(c.name, () => {
      if (c.want instanceof RegExp) expect(() => fromHuman(c.kind, c.value, c.unit)).toThrow(c.want)
      else expect(fromHuman(c.kind, c.value, c.unit)).toBe(c.want)
    })
  }

  it('gives back every value toHuman shows', () => {
    const values: [LimitKind, number][] = [['bytes', 4 << 30], ['bytes', 1234567], ['seconds', 604800], ['millis', 1500], ['count', 65536]]
    for (const [kind, n] of values) {
      const h = toHuman(kind, n)
      expect(fromHuman(kind, h.value, h.unit)).toBe(n)
    }
  })
})

describe('formatLimit', () => {
  const cases: { name: string; kind: LimitKind; n: number | null; want: string }[] = [
    { name: 'no limit', kind: 'count', n: null, want: 'no limit' },
    { name: 'memory', kind: 'bytes', n: 536870912, want: '512 MiB' },
    { name: 'a prompt', kind: 'bytes', n: 262144, want: '256 KiB' },
    { name: 'disk held by changes', kind: 'bytes', n: 4 * 1024 ** 3, want: '4 GiB' },
    { name: 'a few bytes', kind: 'bytes', n: 100, want: '100 bytes' },
    { name: 'a run time', kind: 'seconds', n: 1800, want: '30 min' },
    { name: 'a week', kind: 'seconds', n: 604800, want: '7 days' },
    { name: 'CPU time', kind: 'millis', n: 1_800_000, want: '30 min' },
    { name: 'a count', kind: 'count', n: 100000, want: '100,000' },
  ]
  for (const c of cases) it(c.name, () => expect(formatLimit(c.kind, c.n)).toBe(c.want))
})

describe('exactUnit', () => {
  it('never picks a unit that would show a fraction', () => {
    expect(exactUnit('bytes', 3 * 1024 ** 2 + 1).id).toBe('bytes')
    expect(exactUnit('bytes', 3 * 1024 ** 2).id).toBe('MiB')
  })
})

describe('defaultWords', () => {
  const info: LimitsInfo = {
    defaults: {
      max_prompt_bytes: 262144, max_runs: null, run_timeout_s: 1800, cpu_millis: 1_800_000, memory_bytes: 536870912,
      pids: 128, output_bytes: 1048576, disk_bytes: 1073741824, disk_inodes: 100000, pending_disk_bytes: 4294967296,
    },
    max: {} as Limits,
    notes: {},
  }
  const empty = () => Object.fromEntries(limitFields.map((f) => [f.key, toHuman(f.kind, 0)])) as Record<keyof Limits, HumanValue>
  const kind = (key: keyof Limits) => limitFields.find((f) => f.key === key)!.kind
  const cases: { name: string; key: keyof Limits; info?: LimitsInfo; driver?: string; timeout?: HumanValue; want: string }[] = [
    { name: 'a size', key: 'memory_bytes', want: 'default: 512 MiB' },
    { name: 'no limit', key: 'max_runs', want: 'default: no limit' },
    { name: 'a count', key: 'disk_inodes', want: 'default: 100,000' },
    { name: 'a time', key: 'run_timeout_s', want: 'default: 30 min' },
    { name: 'CPU follows the server’s run time', key: 'cpu_millis', want: 'default: the run’s time on one core (30 min)' },
    { name: 'CPU follows the run time typed', key: 'cpu_millis', timeout: { value: '2', unit: 'hours' }, want: 'default: the run’s time on one core (2 h)' },
    { name: 'CPU with a run time that is not a number yet', key: 'cpu_millis', timeout: { value: 'x', unit: 'hours' }, want: 'default: the run’s time on one core (30 min)' },
    { name: 'an agent CLI’s memory', key: 'memory_bytes', driver: 'codex', want: 'default: what the CLI needs, at least 512 MiB' },
    { name: 'defaults not loaded', key: 'pids', info: undefined, want: 'Empty: the server’s default.' },
  ]
  for (const c of cases) {
    it(c.name, () => {
      const limits = empty()
      if (c.timeout) limits.run_timeout_s = c.timeout
      const i = 'info' in c ? c.info : info
      expect(defaultWords(c.key, kind(c.key), i, { driver: c.driver ?? 'builtin', limits })).toBe(c.want)
    })
  }
})
