//go:build ui

package webui

import (
	"embed"
	"io/fs"
)

//go:embed all:dist
var files embed.FS

var dist = func() fs.FS {
	sub, err := fs.Sub(files, "dist")
	if err != nil {
		panic(err)
	}
	return sub
}()

const built = true
