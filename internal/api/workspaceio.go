package api

import (
	"io"
	"mime"
	"net/http"
	"strconv"
	"time"

	"corral"
)

// transferIdle is how long an import or a download may go without a byte
// moving. The server's request timeout (a minute, for bodies of at most
// MaxBody) would cut a large archive; these two routes move the deadline
// as bytes flow instead, so a slow client is still dropped, and a
// working one is not.
const transferIdle = TransferIdle

// TransferIdle is how long a transfer (an upload, a download) may stall
// before it is cut off: a standby forwarding one slides its deadlines by
// it too.
const TransferIdle = time.Minute

// importView is the answer to an import.
type importView struct {
	Files int   `json:"files"`
	Bytes int64 `json:"bytes"`
}

func (s *Server) deleteFile(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	q := r.URL.Query()
	recursive := false
	if v := q.Get("recursive"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return corral.Errorf(corral.EINVALID, "recursive must be true or false")
		}
		recursive = b
	}
	if err := s.files.DeleteFile(r.Context(), actor, r.PathValue("id"), q.Get("path"), recursive); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) importWorkspace(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	body := &slidingReader{r: r.Body, rc: http.NewResponseController(w)}
	res, err := s.files.Import(r.Context(), actor, r.PathValue("id"), r.Header.Get("Content-Type"), body)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, importView{Files: res.Files, Bytes: res.Bytes})
	return nil
}

func (s *Server) archiveWorkspace(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	wa, err := s.files.Archive(r.Context(), actor, r.PathValue("id"))
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/gzip")
	disposition := mime.FormatMediaType("attachment", map[string]string{"filename": wa.Name})
	if disposition == "" {
		disposition = "attachment"
	}
	w.Header().Set("Content-Disposition", disposition)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	if err := wa.Write(r.Context(), &slidingWriter{w: w, rc: http.NewResponseController(w)}); err != nil {
		// The status is sent: the only honest answer left is a broken
		// connection, so the client never takes a truncated archive for
		// a whole one.
		s.logError(r, corral.Internal("archive workspace", err))
		panic(http.ErrAbortHandler)
	}
	return nil
}

// slidingReader moves the request's read deadline forward as the body
// arrives.
type slidingReader struct {
	r  io.Reader
	rc *http.ResponseController
}

func (s *slidingReader) Read(p []byte) (int, error) {
	_ = s.rc.SetReadDeadline(time.Now().Add(transferIdle))
	return s.r.Read(p)
}

// slidingWriter moves the response's write deadline forward as it is
// written.
type slidingWriter struct {
	w  io.Writer
	rc *http.ResponseController
}

func (s *slidingWriter) Write(p []byte) (int, error) {
	_ = s.rc.SetWriteDeadline(time.Now().Add(transferIdle))
	return s.w.Write(p)
}
