// An agent's answer as Markdown: headings, lists, tables, code blocks with a
// Copy button. react-markdown builds React elements from the Markdown's
// syntax tree, so nothing the model wrote reaches the page as HTML: raw
// HTML in the text is dropped (skipHtml), a link whose address is not
// http(s) or mailto (javascript:, data:) is shown as its text, and an image
// is shown as a link to it rather than loaded (an answer must not make the
// browser fetch an address a prompt put there).

import { Children, isValidElement, useEffect, useRef, useState, type ReactNode } from 'react'
import ReactMarkdown, { type Components } from 'react-markdown'
import remarkGfm from 'remark-gfm'

/** The schemes a link in an answer may use; anything else is not linked. */
const safeSchemes = ['http:', 'https:', 'mailto:']

/**
 * The address a link may have, or '' when it may not be a link at all. A
 * relative address ("#x", "docs/a.md") stays: it stays on this origin.
 */
export function safeURL(url: string): string {
  const u = url.trim()
  // The scheme is whatever comes before the first colon, if that comes
  // before any slash, ? or #: what a browser would read as one.
  const m = /^([^:/?#]*):/.exec(u)
  if (!m) return u
  // Browsers drop tabs and newlines in a scheme ("java\tscript:").
  const scheme = m[1].replace(/[\t\n\r]/g, '').toLowerCase() + ':'
  return safeSchemes.includes(scheme) ? u : ''
}

/** How long "Copied" shows after a copy. */
export const copiedMs = 2000

type CopyState = 'idle' | 'copied' | 'failed'

/** A code block with its language and a Copy button. */
function CodeBlock({ code, language }: { code: string; language?: string }) {
  const [state, setState] = useState<CopyState>('idle')
  const pre = useRef<HTMLPreElement>(null)
  useEffect(() => {
    if (state !== 'copied') return
    const t = setTimeout(() => setState('idle'), copiedMs)
    return () => clearTimeout(t)
  }, [state])

  async function copy() {
    try {
      // Absent outside a secure context; refused when the page may not write it.
      if (!navigator.clipboard) throw new Error('no clipboard')
      await navigator.clipboard.writeText(code)
      setState('copied')
    } catch {
      setState('failed')
      // Select the code, so Ctrl+C copies it by hand.
      const el = pre.current
      const sel = window.getSelection()
      if (el && sel) {
        const range = document.createRange()
        range.selectNodeContents(el)
        sel.removeAllRanges()
        sel.addRange(range)
      }
    }
  }

  return (
    <div className="md-code">
      <div className="md-code-head">
        <span className="md-code-lang">{language ?? 'code'}</span>
        <button type="button" className="secondary small" onClick={() => void copy()} aria-label={`Copy ${language ?? 'code'}`}>
          {state === 'copied' ? 'Copied' : 'Copy'}
        </button>
      </div>
      <pre ref={pre}>
        <code className={language ? `language-${language}` : undefined}>{code}</code>
      </pre>
      {state === 'copied' && (
        <span role="status" className="visually-hidden">
          Copied to the clipboard
        </span>
      )}
      {state === 'failed' && (
        <p role="alert" className="md-copy-failed">
          The browser did not let this page use the clipboard: the code is selected, press Ctrl+C (⌘C) to copy it.
        </p>
      )}
    </div>
  )
}

/** The text of a node react-markdown made (a code element's children are its text). */
function textOf(node: ReactNode): string {
  if (typeof node === 'string' || typeof node === 'number') return String(node)
  if (Array.isArray(node)) return node.map(textOf).join('')
  if (isValidElement<{ children?: ReactNode }>(node)) return textOf(node.props.children)
  return ''
}

const components: Components = {
  // A fenced or indented block is <pre><code class="language-x">: ours
  // instead, with the language and Copy. Inline code stays <code>.
  pre({ children }) {
    const code = Children.toArray(children).find(isValidElement) as { props: { className?: string; children?: ReactNode } } | undefined
    const lang = /(?:^|\s)language-([\w+#.-]+)/.exec(code?.props.className ?? '')?.[1]
    // The fence's closing newline is not part of the code.
    const text = textOf(code ? code.props.children : children).replace(/\n$/, '')
    return <CodeBlock code={text} language={lang} />
  },
  a({ href, children }) {
    if (!href) return <span className="md-unlinked">{children}</span>
    return (
      <a href={href} target="_blank" rel="noopener noreferrer">
        {children}
      </a>
    )
  },
  img({ src, alt }) {
    const label = `image${alt ? `: ${alt}` : ''}`
    if (typeof src !== 'string' || src === '') return <span className="md-unlinked">[{label}]</span>
    return (
      <a href={src} target="_blank" rel="noopener noreferrer">
        [{label}]
      </a>
    )
  },
}

/** Markdown text (an agent's answer) rendered safely. */
export function Markdown({ text, className }: { text: string; className?: string }) {
  return (
    <div className={className ? `md ${className}` : 'md'}>
      <ReactMarkdown remarkPlugins={[remarkGfm]} skipHtml urlTransform={safeURL} components={components}>
        {text}
      </ReactMarkdown>
    </div>
  )
}
