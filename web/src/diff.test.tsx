import { describe, expect, it } from 'vitest'
import { render, screen } from '@testing-library/react'
import { parseUnifiedDiff } from './diff'
import { DiffView } from './DiffView'

describe('parseUnifiedDiff', () => {
  it('parses a created file (go-difflib style)', () => {
    const d = parseUnifiedDiff('--- a/hello.txt\n+++ b/hello.txt\n@@ -0,0 +1 @@\n+Hello from the agent\n')
    expect(d.oldFile).toBe('a/hello.txt')
    expect(d.newFile).toBe('b/hello.txt')
    expect(d.added).toBe(1)
    expect(d.removed).toBe(0)
    expect(d.hunks).toHaveLength(1)
    expect(d.hunks[0].lines).toEqual([{ kind: 'add', text: '+Hello from the agent', newNo: 1 }])
  })

  it('numbers context, removed and added lines', () => {
    const diff = [
      '--- a/x.go\t2024-01-01 00:00:00',
      '+++ b/x.go\t2024-01-02 00:00:00',
      '@@ -10,4 +10,4 @@ func main() {',
      ' a',
      '-b',
      '+B',
      ' c',
      '',
      '@@ -30,2 +30,3 @@',
      ' y',
      '+z',
      ' w',
      '\\ No newline at end of file',
      '',
    ].join('\n')
    const d = parseUnifiedDiff(diff)
    expect(d.oldFile).toBe('a/x.go')
    expect(d.hunks.map((h) => [h.oldStart, h.newStart])).toEqual([
      [10, 10],
      [30, 30],
    ])
    expect(d.hunks[0].lines).toEqual([
      { kind: 'context', text: ' a', oldNo: 10, newNo: 10 },
      { kind: 'del', text: '-b', oldNo: 11 },
      { kind: 'add', text: '+B', newNo: 11 },
      { kind: 'context', text: ' c', oldNo: 12, newNo: 12 },
      { kind: 'context', text: ' ', oldNo: 13, newNo: 13 },
    ])
    expect(d.hunks[1].lines.map((l) => l.kind)).toEqual(['context', 'add', 'context', 'note'])
    expect(d.hunks[1].lines[2]).toEqual({ kind: 'context', text: ' w', oldNo: 31, newNo: 32 })
    expect(d.added).toBe(2)
    expect(d.removed).toBe(1)
  })

  it('parses a deleted file', () => {
    const d = parseUnifiedDiff('--- a/old\n+++ b/old\n@@ -1,2 +0,0 @@\n-one\n-two\n')
    expect(d.hunks[0].lines).toEqual([
      { kind: 'del', text: '-one', oldNo: 1 },
      { kind: 'del', text: '-two', oldNo: 2 },
    ])
  })

  it('gives nothing for an empty diff', () => {
    expect(parseUnifiedDiff('')).toEqual({ hunks: [], added: 0, removed: 0 })
  })

  it('handles CRLF line ends', () => {
    const d = parseUnifiedDiff('@@ -1 +1 @@\r\n-a\r\n+b\r\n')
    expect(d.hunks[0].lines.map((l) => l.text)).toEqual(['-a', '+b'])
  })
})

describe('DiffView', () => {
  it('colours added and removed lines', () => {
    render(<DiffView label="Diff of x" diff={'--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old line\n+new line\n'} />)
    const group = screen.getByRole('group', { name: 'Diff of x' })
    expect(group).toBeTruthy()
    expect(screen.getByText('+new line').parentElement?.className).toBe('diff-line add')
    expect(screen.getByText('-old line').parentElement?.className).toBe('diff-line del')
  })

  it('says when there is no difference', () => {
    render(<DiffView label="Diff of y" diff="" />)
    expect(screen.getByText('No textual difference.')).toBeTruthy()
  })
})
