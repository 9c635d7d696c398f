package app

import (
	"log/slog"
	"path/filepath"

	"corral/internal/secrets"
)

// loadSecretKey returns the key that seals code-host credentials: from
// CORRAL_SECRET_KEY when it is set (then no file is made), else from
// DATA/secret.key, made on the first start. It fails closed (a key file
// others may read, or of the wrong length, stops the server) and never
// logs the key: only where it came from.
func loadSecretKey(c Config, log *slog.Logger) (*secrets.Key, error) {
	if c.SecretKey != "" {
		key, err := secrets.ParseKey(c.SecretKey)
		if err != nil {
			return nil, err
		}
		log.Info("secret key from CORRAL_SECRET_KEY")
		return key, nil
	}
	path := filepath.Join(c.Data, secrets.KeyFile)
	key, created, err := secrets.LoadKeyFile(path)
	if err != nil {
		return nil, err
	}
	if created {
		log.Warn("created a new secret key: back it up apart from the database, since stored credentials cannot be opened without it", "path", path)
	} else {
		log.Info("secret key loaded", "path", path)
	}
	return key, nil
}
