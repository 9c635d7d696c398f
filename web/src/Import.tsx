// Choosing what to import into a workspace (an archive file, a folder, or
// either dropped on the page) and watching it go up with a real progress
// bar: the bytes XMLHttpRequest reports sent, then the server unpacking.

import { useState, type DragEvent, type FormEvent } from 'react'
import { api, type UploadProgress } from './api'
import { Dropzone } from './Dropzone'
import { archiveHint, archiveType, uploadOfDrop, uploadOfFolderFiles, type DroppedEntry, type Upload } from './archive'
import { ErrorText } from './feedback'
import { Field } from './Field'
import { formatBytes } from './format'
import type { ImportResult } from './types'

/** The drop zone and pickers; reports the chosen upload, or clears it (null). */
export function ArchivePicker({ chosen, onChoose }: { chosen: Upload | null; onChoose: (u: Upload | null) => void }) {
  const [problem, setProblem] = useState<string>()

  function take(u: Upload | { error: string }) {
    if ('error' in u) {
      setProblem(u.error)
      onChoose(null)
    } else {
      setProblem(undefined)
      onChoose(u)
    }
  }

  function onFile(files: FileList | null) {
    const f = files?.[0]
    if (!f) return
    const t = archiveType(f.name, f.type)
    take(t ? { label: f.name, body: f, contentType: t } : { error: `${f.name} is not an archive we can import. ${archiveHint}` })
  }

  function onDrop(e: DragEvent<HTMLDivElement>) {
    // The entries must be taken while the event lasts: the DataTransfer empties after it.
    const items = Array.from(e.dataTransfer.items ?? [])
    const entries = items
      .map((i) => (i.kind === 'file' ? (i.webkitGetAsEntry?.() as DroppedEntry | null) : null))
      .filter((x): x is DroppedEntry => x !== null && x !== undefined)
    const files = Array.from(e.dataTransfer.files ?? [])
    uploadOfDrop(entries, files).then(take, (err) => take({ error: `Could not read what was dropped: ${String(err?.message ?? err)}` }))
  }

  return (
    <Dropzone label="Archive or folder to import" onDrop={onDrop}>
      <p>Drop an archive or a folder here, or choose one:</p>
      <div className="row">
        <Field label="Archive file" hint={archiveHint}>
          {(p) => <input {...p} type="file" accept=".tar,.tar.gz,.tgz,.gz,.zip,application/zip,application/gzip,application/x-tar" onChange={(e) => onFile(e.target.files)} />}
        </Field>
        <Field label="Folder" hint="Packed into a tar in your browser, then uploaded.">
          {(p) => (
            <input
              {...p}
              type="file"
              // Not in React's types: the directory picker attributes.
              {...({ webkitdirectory: '', directory: '' } as Record<string, string>)}
              onChange={(e) => take(uploadOfFolderFiles(Array.from(e.target.files ?? [])))}
            />
          )}
        </Field>
      </div>
      {chosen && (
        <p>
          To import: <strong>{chosen.label}</strong> <span className="muted">({formatBytes(chosen.body.size)})</span>{' '}
          <button type="button" className="secondary" onClick={() => onChoose(null)}>
            Clear
          </button>
        </p>
      )}
      {problem && (
        <p role="alert" className="error">
          {problem}
        </p>
      )}
    </Dropzone>
  )
}

/** Where an upload stands: null before it starts. */
export type UploadState = UploadProgress | null

/**
 * The progress bar of an upload, then of the server working on it (sentText:
 * unpacking an archive by default). label names the bar, so several on one
 * page stay apart.
 */
export function UploadBar({
  state,
  label = 'Upload progress',
  sentText = 'Uploaded; the server is unpacking it…',
}: {
  state: UploadState
  label?: string
  sentText?: string
}) {
  if (!state) return null
  const total = state.total > 0 ? state.total : 1
  const pct = Math.min(100, Math.round((state.loaded / total) * 100))
  const sent = state.total > 0 && state.loaded >= state.total
  return (
    <div className="upload-progress">
      <progress aria-label={label} max={100} value={pct} />
      <span role="status">
        {sent ? sentText : `${pct}% · ${formatBytes(state.loaded)} of ${formatBytes(state.total)}`}
      </span>
    </div>
  )
}

/** Uploads u into the agent's workspace, reporting progress; the server's answer. */
export function importInto(agentId: string, u: Upload, onProgress: (p: UploadProgress) => void): Promise<ImportResult> {
  onProgress({ loaded: 0, total: u.body.size })
  return api.importArchive(agentId, u.body, u.contentType, onProgress)
}

/** The files tab's import form, for editors and owners. */
export function ImportPanel({ agentId, onImported }: { agentId: string; onImported: (r: ImportResult) => void }) {
  const [chosen, setChosen] = useState<Upload | null>(null)
  const [progress, setProgress] = useState<UploadState>(null)
  const [error, setError] = useState<unknown>()
  const [done, setDone] = useState<ImportResult>()
  const busy = progress !== null

  async function submit(e: FormEvent) {
    e.preventDefault()
    if (!chosen || busy) return
    setError(undefined)
    setDone(undefined)
    try {
      const r = await importInto(agentId, chosen, setProgress)
      setDone(r)
      setChosen(null)
      onImported(r)
    } catch (err) {
      setError(err)
    } finally {
      setProgress(null)
    }
  }

  return (
    <form onSubmit={submit} className="stack import" aria-labelledby="import-heading">
      <h3 id="import-heading">Import an archive</h3>
      <p className="muted">All or nothing: an entry the server refuses stops the import, and nothing is written.</p>
      <ArchivePicker chosen={chosen} onChoose={setChosen} />
      <UploadBar state={progress} />
      <ErrorText error={error} />
      {done && (
        <p role="status" className="ok">
          Imported {done.files} {done.files === 1 ? 'file' : 'files'} ({formatBytes(done.bytes)}).
        </p>
      )}
      <div>
        <button type="submit" disabled={!chosen || busy}>
          Import
        </button>
      </div>
    </form>
  )
}
