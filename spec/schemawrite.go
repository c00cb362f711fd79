package spec

import (
	"encoding/json"
	"fmt"
	"io"
)

// WriteSchema writes SchemaFor(cat) indented, as `rubberband schema` prints it for editors.
func WriteSchema(w io.Writer, cat InstanceCatalog) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // descriptions are read by people, not pasted into HTML
	if err := enc.Encode(SchemaFor(cat)); err != nil {
		return fmt.Errorf("write the schema: %w", err)
	}
	return nil
}
