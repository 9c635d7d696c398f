package driver

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"corral"
)

// pins is the package.json that scripts/install-tools.sh installs and
// copies into the tools directory: the same bytes there mean the same
// versions.
//
//go:embed tools/package.json
var pins []byte

// Installed checks, on the host, that toolsDir (as `make tools` fills it,
// before it is mounted into sessions) holds driver name's CLI at the
// versions this server pins. The built-in driver needs nothing. A missing
// or outdated CLI is EUNAVAIL, saying to run make tools.
func Installed(toolsDir, name string) error {
	if name == Builtin {
		return Valid(name)
	}
	c, err := lookup(name)
	if err != nil {
		return err
	}
	missing := func(why string, err error) error {
		return &corral.Error{
			Code:    corral.EUNAVAIL,
			Message: fmt.Sprintf("the %s driver's CLI is not installed: %s (run make tools)", name, why),
			Op:      "driver.Installed",
			Err:     err,
		}
	}
	if toolsDir == "" {
		return missing("no tools directory is configured", nil)
	}
	bin := filepath.Join(toolsDir, "bin", c.bin)
	st, err := os.Stat(bin)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return missing(fmt.Sprintf("%s is missing", bin), err)
	case err != nil:
		return missing(fmt.Sprintf("%s cannot be read", bin), err)
	case !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0:
		return missing(fmt.Sprintf("%s is not an executable file", bin), nil)
	}
	got, err := os.ReadFile(filepath.Join(toolsDir, "package.json"))
	if err != nil {
		return missing(fmt.Sprintf("%s has no package.json", toolsDir), err)
	}
	if !bytes.Equal(got, pins) {
		return missing(fmt.Sprintf("%s holds other versions than this server pins", toolsDir), nil)
	}
	if name == OpenCode {
		// Without the first OpenCode cannot start on a read-only tools
		// directory; without the second its grep and glob tools fail.
		if _, err := os.Stat(filepath.Join(toolsDir, openCodeConfigHome, "opencode", ".gitignore")); err != nil {
			return missing(fmt.Sprintf("%s has no OpenCode config directory", toolsDir), err)
		}
		if st, err := os.Stat(filepath.Join(toolsDir, openCodePath, "rg")); err != nil || st.Mode().Perm()&0o111 == 0 {
			return missing(fmt.Sprintf("%s has no ripgrep for OpenCode", toolsDir), err)
		}
	}
	return nil
}
