import { describe, expect, it } from 'vitest'
import { escapeName, shownName } from './names'

describe('escapeName', () => {
  const cases: { name: string; in: string; want: string }[] = [
    { name: 'plain', in: 'src/main.go', want: 'src/main.go' },
    { name: 'space and unicode letters', in: 'my notes/café ü.txt', want: 'my notes/café ü.txt' },
    { name: 'newline and tab', in: 'a\nb\tc', want: 'a\\nb\\tc' },
    { name: 'terminal escape', in: 'x\x1b[31m', want: 'x\\x1b[31m' },
    { name: 'delete character', in: 'a\x7f', want: 'a\\x7f' },
    { name: 'right-to-left override', in: 'invoice\u202etxt.exe', want: 'invoice\\u202etxt.exe' },
    { name: 'zero-width space', in: 'a\u200bb', want: 'a\\u200bb' },
    { name: 'no-break space', in: 'a\u00a0b', want: 'a\\u00a0b' },
    { name: 'line separator', in: 'a\u2028b', want: 'a\\u2028b' },
    { name: 'lone surrogate', in: 'a\ud800b', want: 'a\\ud800b' },
    { name: 'astral private use', in: 'a\u{f0000}', want: 'a\\U000f0000' },
    { name: 'emoji prints', in: 'party\u{1f389}.txt', want: 'party\u{1f389}.txt' },
    { name: 'backslash', in: 'a\\nb', want: 'a\\\\nb' },
  ]
  for (const c of cases) {
    it(c.name, () => {
      expect(escapeName(c.in)).toBe(c.want)
    })
  }
})

describe('shownName', () => {
  const cases: { name: string; in: { path: string; path_escaped?: string; flags?: string[] }; want: { text: string; unusual: boolean } }[] = [
    { name: 'plain name', in: { path: 'hello.txt', path_escaped: 'hello.txt' }, want: { text: 'hello.txt', unusual: false } },
    {
      name: 'the server’s escaping wins',
      in: { path: 'bad\ufffd.txt', path_escaped: 'bad\\xff.txt' },
      want: { text: 'bad\\xff.txt', unusual: true },
    },
    { name: 'no path_escaped: escaped here', in: { path: 'a\nb' }, want: { text: 'a\\nb', unusual: true } },
    { name: 'empty path_escaped: escaped here', in: { path: 'a\u202eb', path_escaped: '' }, want: { text: 'a\\u202eb', unusual: true } },
    {
      name: 'path_escaped equal to an unsafe path: still escaped',
      in: { path: 'a\x1bb', path_escaped: 'a\x1bb' },
      want: { text: 'a\\x1bb', unusual: true },
    },
    {
      name: 'flagged name, sent already escaped',
      in: { path: 'a\\x1bb', path_escaped: 'a\\x1bb', flags: ['name'] },
      want: { text: 'a\\x1bb', unusual: true },
    },
    { name: 'other flags leave a plain name plain', in: { path: 'run.sh', path_escaped: 'run.sh', flags: ['setuid'] }, want: { text: 'run.sh', unusual: false } },
  ]
  for (const c of cases) {
    it(c.name, () => {
      expect(shownName(c.in)).toEqual(c.want)
    })
  }
})
