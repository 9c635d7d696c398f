// Documents agents retrieve from: an agent's private ones (its Documents
// tab) and the shared library (its own page) share the list, the uploader
// and the delete here; the tab adds a search to try what retrieval finds,
// and answers that drew on documents show their sources. The server decides
// what may be indexed (it refuses PDFs, binary files and Corral's own
// scaffolding such as AGENTS.md in its own words, shown next to the file)
// and who may delete; this only keeps doomed controls off the page.

import { useEffect, useRef, useState, type DragEvent, type FormEvent } from 'react'
import { ConfirmDelete } from './ConfirmDelete'
import { Dropzone } from './Dropzone'
import { api, type UploadProgress } from './api'
import { SourceBadge } from './badges'
import { ErrorText, Loading, useLoad } from './feedback'
import { Field } from './Field'
import { formatBytes, formatConfidence, formatScore, formatTime } from './format'
import { UploadBar, type UploadState } from './Import'
import { Link } from './router'
import type { Agent, Doc, MessageSource, SearchResult } from './types'

function plural(n: number, one: string, many = one + 's'): string {
  return `${n} ${n === 1 ? one : many}`
}

/** Sends one file's bytes under its name; the stored document. */
export type DocumentUpload = (name: string, body: Blob, contentType: string, onProgress: (p: UploadProgress) => void) => Promise<Doc>

/** The type a file is sent with: its own, or plain text when the browser does not know it (a .go or .rs file). */
export function contentTypeOf(f: File): string {
  return f.type !== '' ? f.type : 'text/plain'
}

interface Queued {
  key: number
  file: File
  state: 'waiting' | 'uploading' | 'done' | 'failed'
  progress: UploadState
  doc?: Doc
  error?: unknown
}

/**
 * A picker (and drop zone) for one or several files, uploaded one after
 * another, each with its own progress bar and, when the server refuses it,
 * the server's reason next to it; one refusal does not stop the rest.
 */
export function DocumentUploader({ upload, onUploaded }: { upload: DocumentUpload; onUploaded: (d: Doc) => void }) {
  const [queue, setQueue] = useState<Queued[]>([])
  const waiting = useRef<Queued[]>([])
  const draining = useRef(false)
  const nextKey = useRef(0)
  // Read when each upload starts and ends, so a drain started earlier uses the current ones.
  const uploaded = useRef(onUploaded)
  const send = useRef(upload)
  useEffect(() => {
    uploaded.current = onUploaded
    send.current = upload
  }, [onUploaded, upload])

  function update(key: number, change: Partial<Queued>) {
    setQueue((q) => q.map((x) => (x.key === key ? { ...x, ...change } : x)))
  }

  async function drain() {
    if (draining.current) return
    draining.current = true
    try {
      for (let item = waiting.current.shift(); item; item = waiting.current.shift()) {
        const { key, file } = item
        update(key, { state: 'uploading', progress: { loaded: 0, total: file.size } })
        try {
          const doc = await send.current(file.name, file, contentTypeOf(file), (p) => update(key, { progress: p }))
          update(key, { state: 'done', doc, progress: null })
          uploaded.current(doc)
        } catch (err) {
          update(key, { state: 'failed', error: err, progress: null })
        }
      }
    } finally {
      draining.current = false
    }
  }

  function add(files: File[]) {
    if (files.length === 0) return
    const items: Queued[] = files.map((file) => ({ key: nextKey.current++, file, state: 'waiting', progress: null }))
    waiting.current.push(...items)
    setQueue((q) => [...q, ...items])
    void drain()
  }

  function onDrop(e: DragEvent<HTMLDivElement>) {
    add(Array.from(e.dataTransfer.files ?? []))
  }

  const busy = queue.some((q) => q.state === 'waiting' || q.state === 'uploading')

  return (
    <div className="stack doc-upload">
      <Dropzone label="Documents to upload" onDrop={onDrop}>
        <Field label="Document files" hint="Text, Markdown or source files, one or several (or drop them here): each goes up in turn and is indexed.">
          {(p) => (
            <input
              {...p}
              type="file"
              multiple
              onChange={(e) => {
                add(Array.from(e.target.files ?? []))
                // So choosing the same file again (after a refusal) is a change.
                e.target.value = ''
              }}
            />
          )}
        </Field>
      </Dropzone>
      {queue.length > 0 && (
        <>
          <ul className="doc-uploads" aria-label="Uploads">
            {queue.map((q) => (
              <li key={q.key} aria-label={`Upload of ${q.file.name}`} className={`doc-upload-${q.state}`}>
                <div>
                  <strong>{q.file.name}</strong> <span className="muted">({formatBytes(q.file.size)})</span>{' '}
                  {q.state === 'waiting' && <span className="muted">waiting…</span>}
                  {q.state === 'done' && q.doc && (
                    <span className="ok">indexed: {plural(q.doc.chunks, 'passage')}</span>
                  )}
                </div>
                {q.state === 'uploading' && (
                  <UploadBar state={q.progress} label={`Upload progress of ${q.file.name}`} sentText="Uploaded; the server is indexing it…" />
                )}
                {q.state === 'failed' && <ErrorText error={q.error} />}
              </li>
            ))}
          </ul>
          {!busy && (
            <div>
              <button type="button" className="secondary small" onClick={() => setQueue([])}>
                Clear the list
              </button>
            </div>
          )}
        </>
      )}
    </div>
  )
}

/** Delete, asked once more inline; remove does it, onDeleted follows. */
function DeleteDocument({ doc, remove, onDeleted }: { doc: Doc; remove: (d: Doc) => Promise<void>; onDeleted: () => void }) {
  return (
    <ConfirmDelete
      name={doc.name}
      question={doc.source === 'library' ? `Delete ${doc.name} from the library? No agent will find it any more.` : `Delete ${doc.name}? This agent will no longer find it.`}
      remove={() => remove(doc)}
      onDeleted={onDeleted}
    />
  )
}

/** The documents as a table; Delete on those deletable says yes to. */
export function DocumentList({
  docs,
  label,
  deletable,
  remove,
  onDeleted,
}: {
  docs: Doc[]
  label: string
  deletable: (d: Doc) => boolean
  remove: (d: Doc) => Promise<void>
  onDeleted: () => void
}) {
  const actions = docs.some(deletable)
  return (
    <table className="list documents" aria-label={label}>
      <thead>
        <tr>
          <th scope="col">Name</th>
          <th scope="col">Where</th>
          <th scope="col">Size</th>
          <th scope="col">Passages</th>
          <th scope="col">Added by</th>
          <th scope="col">Added</th>
          {actions && <th scope="col">Actions</th>}
        </tr>
      </thead>
      <tbody>
        {docs.map((d) => (
          <tr key={d.id}>
            <th scope="row">{d.name}</th>
            <td>
              <SourceBadge source={d.source} />
            </td>
            <td>{formatBytes(d.bytes)}</td>
            <td>
              {d.chunks}
              {d.embedded && <span className="muted small"> · with embeddings</span>}
            </td>
            <td>{d.author?.name ?? 'A former member'}</td>
            <td>{formatTime(d.created_at)}</td>
            {actions && <td>{deletable(d) && <DeleteDocument doc={d} remove={remove} onDeleted={onDeleted} />}</td>}
          </tr>
        ))}
      </tbody>
    </table>
  )
}

const rankerWords: Record<string, string> = {
  bm25: 'full-text ranking (BM25)',
  fused: 'full-text ranking and embeddings, fused',
}

/**
 * What a search answered: the passages with their scores. Below the
 * server's threshold the agent is told only that nothing relevant was found;
 * a person still sees the weak passages, marked as such, to review.
 */
function SearchAnswer({ result }: { result: SearchResult }) {
  const ranker = rankerWords[result.ranker] ?? result.ranker
  return (
    <div className="search-answer">
      {result.answerable && result.items.length > 0 ? (
        <p role="status">
          {plural(result.items.length, 'passage')} found (confidence {formatConfidence(result.confidence)})
          {ranker && <span className="muted"> · {ranker}</span>}
        </p>
      ) : (
        <p role="status">Nothing relevant found (confidence {formatConfidence(result.confidence)})</p>
      )}
      {result.note && <p className="muted small">{result.note}</p>}
      {!result.answerable && result.items.length > 0 && (
        <p className="muted small">Below the confidence threshold: a run of this agent is not given these passages.</p>
      )}
      {result.items.length > 0 && (
        <ol className={result.answerable ? 'passages' : 'passages weak'} aria-label={result.answerable ? 'Passages' : 'Weak passages'}>
          {result.items.map((h) => (
            <li key={h.chunk_id}>
              <div className="passage-meta">
                <strong>{h.name}</strong>
                {h.heading && <span className="muted"> › {h.heading}</span>} · <SourceBadge source={h.source} /> · score {formatScore(h.score)}
              </div>
              <pre className="passage-text">{h.text}</pre>
            </li>
          ))}
        </ol>
      )}
    </div>
  )
}

/** A query against what the agent may draw from, to see what its runs would be given. */
export function SearchBox({ agentId, library }: { agentId: string; library: boolean }) {
  const [query, setQuery] = useState('')
  const [result, setResult] = useState<SearchResult>()
  const [error, setError] = useState<unknown>()
  const [busy, setBusy] = useState(false)

  async function submit(e: FormEvent) {
    e.preventDefault()
    const q = query.trim()
    if (q === '' || busy) return
    setBusy(true)
    setError(undefined)
    try {
      setResult(await api.search(agentId, q))
    } catch (err) {
      setResult(undefined)
      setError(err)
    } finally {
      setBusy(false)
    }
  }

  return (
    <form onSubmit={submit} className="stack search" aria-labelledby="search-heading">
      <h3 id="search-heading">Try a search</h3>
      <p className="muted">
        What a run of this agent would be given for a question: its private documents{library ? ' and the library’s' : ''}.
      </p>
      <div className="row">
        <Field label="Search query">{(p) => <input {...p} type="search" value={query} onChange={(e) => setQuery(e.target.value)} />}</Field>
        <div>
          <button type="submit" disabled={busy || query.trim() === ''}>
            Search
          </button>
        </div>
      </div>
      <ErrorText error={error} />
      {result && <SearchAnswer result={result} />}
    </form>
  )
}

/** The agent's Documents tab: its documents, upload and delete for editors and owners, and the search for everyone. */
export function DocumentsTab({ agent }: { agent: Agent }) {
  const agentId = agent.id
  const docs = useLoad(() => api.documents(agentId), [agentId])
  const editor = agent.can.includes('write_documents')
  // A library document is managed on the library page, never through an agent.
  const deletable = (d: Doc) => editor && d.source === 'private' && d.can_delete !== false

  return (
    <section aria-labelledby="documents-heading">
      <h2 id="documents-heading">Documents</h2>
      <p className="muted">
        Private documents stay with this agent: its runs, and the people it is shared with, can search them.{' '}
        {agent.policy.library ? (
          <>
            Its runs also draw on the <Link to="/library">shared library</Link>, marked to the model as untrusted.
          </>
        ) : (
          <>
            It does not use the <Link to="/library">shared library</Link> (an editor turns that on in its settings).
          </>
        )}
      </p>
      <ErrorText error={docs.error} />
      {docs.loading && !docs.data && <Loading what="documents" />}
      {docs.data && docs.data.length === 0 && (
        <p className="empty">No documents yet{editor ? ': upload text, Markdown or source files below.' : '.'}</p>
      )}
      {docs.data && docs.data.length > 0 && (
        <DocumentList
          docs={docs.data}
          label={`Documents of ${agent.name}`}
          deletable={deletable}
          remove={(d) => api.deleteDocument(agentId, d.id)}
          onDeleted={() => void docs.reload()}
        />
      )}
      {editor && (
        <div className="stack import">
          <h3>Upload documents</h3>
          <DocumentUploader
            upload={(name, body, type, onProgress) => api.uploadDocument(agentId, name, body, type, onProgress)}
            onUploaded={() => void docs.reload()}
          />
        </div>
      )}
      <div className="import">
        <SearchBox agentId={agentId} library={agent.policy.library} />
      </div>
    </section>
  )
}

/** Under an assistant answer that drew on documents: each one, where it lives, and retrieval's confidence. */
export function MessageSources({ sources }: { sources?: MessageSource[] }) {
  if (!sources || sources.length === 0) return null
  return (
    <div className="sources">
      <span className="sources-title">Sources</span>
      <ul aria-label="Sources">
        {sources.map((s, i) => (
          <li key={`${s.document_id}-${i}`} title={`score ${formatScore(s.score)}`}>
            {s.name} · <SourceBadge source={s.source} /> · {formatConfidence(s.confidence)}
          </li>
        ))}
      </ul>
    </div>
  )
}
