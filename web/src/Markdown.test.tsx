import { act, fireEvent, render, screen } from '@testing-library/react'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { Markdown, safeURL } from './Markdown'

afterEach(() => {
  vi.unstubAllGlobals()
  vi.useRealTimers()
})

function stubClipboard(writeText: (s: string) => Promise<void>) {
  vi.stubGlobal('navigator', { ...navigator, clipboard: { writeText } })
}

const answer = [
  '# Plan',
  '',
  'Steps:',
  '',
  '- read the tests',
  '- **fix** the `parser`',
  '',
  '```go',
  'func main() {',
  '\tfmt.Println("hi")',
  '}',
  '```',
  '',
  '| file | lines |',
  '| --- | --- |',
  '| a.go | 12 |',
].join('\n')

describe('Markdown', () => {
  it('renders headings, lists, inline code, tables and code blocks with their language', () => {
    const { container } = render(<Markdown text={answer} />)
    expect(screen.getByRole('heading', { level: 1, name: 'Plan' })).toBeTruthy()
    expect(screen.getAllByRole('listitem').map((li) => li.textContent)).toEqual(['read the tests', 'fix the parser'])
    expect(container.querySelector('li code')?.textContent).toBe('parser')
    const code = container.querySelector('pre code')
    expect(code?.className).toBe('language-go')
    expect(code?.textContent).toBe('func main() {\n\tfmt.Println("hi")\n}')
    expect(screen.getByText('go', { selector: '.md-code-lang' })).toBeTruthy()
    expect(screen.getByRole('table')).toBeTruthy()
    expect(screen.getByRole('cell', { name: 'a.go' })).toBeTruthy()
  })

  const hostile: { name: string; text: string }[] = [
    { name: 'a script tag', text: 'before <script>window.pwned = 1</script> after' },
    { name: 'a script block', text: '<script>\nwindow.pwned = 1\n</script>\n\nafter' },
    { name: 'an img with onerror', text: 'look <img src=x onerror="window.pwned=1"> here' },
    { name: 'an img block with onerror', text: '<img src=x onerror="window.pwned=1">\n\nafter' },
    { name: 'an iframe', text: '<iframe src="javascript:window.pwned=1"></iframe>' },
    { name: 'an inline event handler on a div', text: '<div onmouseover="window.pwned=1">hover</div>' },
  ]
  for (const c of hostile) {
    it(`drops raw HTML: ${c.name}`, () => {
      const { container } = render(<Markdown text={c.text} />)
      expect(container.querySelector('script, img, iframe, [onerror], [onmouseover]')).toBeNull()
      expect(container.innerHTML).not.toMatch(/<(script|img|iframe|div onmouseover)/i)
      expect((window as unknown as { pwned?: number }).pwned).toBeUndefined()
    })
  }

  const links: { name: string; text: string; href: string | null }[] = [
    { name: 'an https link', text: '[docs](https://example.com/a)', href: 'https://example.com/a' },
    { name: 'a mailto link', text: '[mail](mailto:a@example.com)', href: 'mailto:a@example.com' },
    { name: 'a javascript: link', text: '[click](javascript:alert(1))', href: null },
    { name: 'a javascript: link in capitals', text: '[click](JaVaScRiPt:alert(1))', href: null },
    { name: 'a javascript: link with a tab in the scheme', text: '[click](<java\tscript:alert(1)>)', href: null },
    { name: 'a data: link', text: '[click](data:text/html,<script>alert(1)</script>)', href: null },
    { name: 'a vbscript: autolink', text: '<vbscript:msgbox(1)>', href: null },
  ]
  for (const c of links) {
    it(`links: ${c.name}`, () => {
      const { container } = render(<Markdown text={c.text} />)
      const a = container.querySelector('a')
      if (c.href === null) {
        expect(a?.getAttribute('href') ?? null).toBeNull()
        // Shown as text at most, never in an attribute.
        expect(container.querySelector('[href], [src]')).toBeNull()
        return
      }
      expect(a?.getAttribute('href')).toBe(c.href)
      expect(a?.getAttribute('rel')).toBe('noopener noreferrer')
      expect(a?.getAttribute('target')).toBe('_blank')
    })
  }

  it('shows a Markdown image as a link to it, never loading it', () => {
    const { container } = render(<Markdown text="![chart](https://example.com/c.png?leak=1)" />)
    expect(container.querySelector('img')).toBeNull()
    const a = screen.getByRole('link', { name: '[image: chart]' })
    expect(a.getAttribute('href')).toBe('https://example.com/c.png?leak=1')
    expect(a.getAttribute('rel')).toBe('noopener noreferrer')
  })

  it('copies a code block, says Copied, then Copy again', async () => {
    vi.useFakeTimers()
    const writeText = vi.fn(async () => {})
    stubClipboard(writeText)
    render(<Markdown text={'```sh\nmake test\n```'} />)
    const button = screen.getByRole('button', { name: 'Copy sh' })
    await act(async () => fireEvent.click(button))
    expect(writeText).toHaveBeenCalledWith('make test')
    expect(button.textContent).toBe('Copied')
    expect(screen.getByRole('status').textContent).toBe('Copied to the clipboard')
    await act(async () => vi.advanceTimersByTime(2000))
    expect(button.textContent).toBe('Copy')
  })

  it('says so, and selects the code, when the clipboard is refused', async () => {
    stubClipboard(async () => {
      throw new DOMException('denied', 'NotAllowedError')
    })
    render(<Markdown text={'```\nsecret sauce\n```'} />)
    await act(async () => fireEvent.click(screen.getByRole('button', { name: 'Copy code' })))
    expect(screen.getByRole('alert').textContent).toMatch(/did not let this page use the clipboard/)
    expect(screen.getByRole('button', { name: 'Copy code' }).textContent).toBe('Copy')
    expect(window.getSelection()?.toString()).toBe('secret sauce')
  })

  it('says so when there is no clipboard at all (not a secure context)', async () => {
    vi.stubGlobal('navigator', { ...navigator, clipboard: undefined })
    render(<Markdown text={'```\nx\n```'} />)
    await act(async () => fireEvent.click(screen.getByRole('button', { name: 'Copy code' })))
    expect(screen.getByRole('alert')).toBeTruthy()
  })
})

describe('safeURL', () => {
  const cases: [string, string][] = [
    ['https://example.com', 'https://example.com'],
    ['http://example.com/x?y#z', 'http://example.com/x?y#z'],
    ['mailto:a@b.c', 'mailto:a@b.c'],
    ['docs/a.md', 'docs/a.md'],
    ['#section', '#section'],
    ['/runs/run_1', '/runs/run_1'],
    ['a/b:c', 'a/b:c'],
    ['javascript:alert(1)', ''],
    [' javascript:alert(1)', ''],
    ['JAVASCRIPT:alert(1)', ''],
    ['java\nscript:alert(1)', ''],
    ['data:text/html,x', ''],
    ['file:///etc/passwd', ''],
  ]
  for (const [url, want] of cases) {
    it(`safeURL(${JSON.stringify(url)}) = ${JSON.stringify(want)}`, () => expect(safeURL(url)).toBe(want))
  }
})
