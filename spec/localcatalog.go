package spec

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// LocalCatalogName is the local catalog file's name under the runs' root folder.
const LocalCatalogName = "catalog.json"

// LocalCatalogPath is the local catalog file: path when given, else ROOT/catalog.json.
func LocalCatalogPath(path, root string) string {
	if path != "" {
		return path
	}
	return filepath.Join(root, LocalCatalogName)
}

// ReadLocalCatalog reads the local catalog file and says its path: path, which must exist, else
// ROOT/catalog.json when there is one; a nil file and "" when path is "" and there is none.
func ReadLocalCatalog(path, root string) (string, *CatalogFile, error) {
	if path == "" {
		path = LocalCatalogPath(path, root)
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return "", nil, nil
		}
	}
	f, err := ReadCatalogFile(path)
	return path, f, err
}
