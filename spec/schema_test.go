package spec

import (
	"encoding/json"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"
)

// compileSchema compiles s with a real draft 2020-12 validator, which also checks s against the
// draft's meta-schema.
func compileSchema(t *testing.T, s map[string]any) *jsonschema.Schema {
	t.Helper()
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("spec.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("spec.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return sch
}

// yamlToJSON turns YAML into the values a YAML language server checks against the schema: keys
// as strings, scalars typed by their YAML tags as the decoder types them.
func yamlToJSON(t *testing.T, data []byte) any {
	t.Helper()
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		t.Fatal(err)
	}
	var conv func(n *yaml.Node) any
	conv = func(n *yaml.Node) any {
		switch n.Kind {
		case yaml.DocumentNode:
			return conv(n.Content[0])
		case yaml.AliasNode:
			return conv(n.Alias)
		case yaml.MappingNode:
			m := map[string]any{}
			for i := 0; i+1 < len(n.Content); i += 2 {
				m[n.Content[i].Value] = conv(n.Content[i+1])
			}
			return m
		case yaml.SequenceNode:
			l := []any{}
			for _, c := range n.Content {
				l = append(l, conv(c))
			}
			return l
		}
		switch n.Tag {
		case "!!null":
			return nil
		case "!!bool":
			b, _ := strconv.ParseBool(n.Value)
			return b
		case "!!int", "!!float":
			f, err := strconv.ParseFloat(strings.ReplaceAll(n.Value, "_", ""), 64)
			if err != nil {
				i, err := strconv.ParseInt(strings.ReplaceAll(n.Value, "_", ""), 0, 64)
				if err != nil {
					t.Fatalf("line %d: %q is not a number", n.Line, n.Value)
				}
				f = float64(i)
			}
			return json.Number(strconv.FormatFloat(f, 'g', -1, 64))
		}
		return n.Value
	}
	return conv(&root)
}

// TestSchemaAcceptsRepoSpecs: every spec in the repository validates against the schema, and
// every profile file against the schema of profile.
func TestSchemaAcceptsRepoSpecs(t *testing.T) {
	full := Schema()
	specs := compileSchema(t, full)
	profile := full["properties"].(map[string]any)["profile"].(map[string]any)
	profiles := compileSchema(t, map[string]any{"$schema": SchemaDialect, "allOf": []any{profile}})
	n := 0
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != ".." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "invalid") { // .git, .tools, .ci; specs wrong on purpose
			return filepath.SkipDir
		}
		if d.IsDir() || filepath.Ext(path) != ".yaml" || path == filepath.Join("..", "docs", "openapi.yaml") { // the server's API, not a spec
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if kubernetesManifest(data) { // examples/deploy/kubernetes: objects for the cluster, not specs
			return nil
		}
		sch := specs
		if filepath.Base(filepath.Dir(path)) == "profiles" {
			sch = profiles
		} else if _, err := Load(path); err != nil {
			t.Errorf("%s is neither a valid spec nor in a profiles directory: %v", path, err)
			return nil
		}
		if err := sch.Validate(yamlToJSON(t, data)); err != nil {
			t.Errorf("%s: %v", path, err)
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 15 {
		t.Fatalf("checked only %d YAML files", n)
	}
}

// TestSchemaAgreesWithParse: the schema accepts what Parse accepts and rejects what Parse
// rejects for what one field alone can get wrong, so it can fail and cannot drift from validation.
func TestSchemaAgreesWithParse(t *testing.T) {
	base, err := os.ReadFile("testdata/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sch := compileSchema(t, Schema())
	for _, c := range []struct {
		name, old, new string
		ok             bool
	}{
		{"as is", "", "", true},
		{"unknown field", "seed: 1", "seed: 1\ncolour: blue", false},
		{"unknown nested field", "max_nodes: 64", "max_nodes: 64\n  gpu_count: 4", false},
		{"wrong type", "max_nodes: 64", "max_nodes: 64\n  gpus_per_node: two", false},
		{"bad enum", "mode: max", "mode: best", false},
		{"bad planner", "name: greedy", "name: fastest", false},
		{"bad market", "market: on-demand", "market: reserved", false},
		{"bad dist", "dist: normal", "dist: gamma", false},
		{"bad param type", "type: uniform", "type: normal", false},
		{"bad instance type", "p3.8xlarge", "p9.huge", false},
		{"bad name", "cifar10-resnet101", "CIFAR_10", false},
		{"eta 1", "eta: 3", "eta: 1", false},
		{"no samples", "samples: 100", "samples: 0", false},
		{"quantile above 1", "deadline_quantile: 0.5", "deadline_quantile: 1.5", false},
		{"too many nodes", "max_nodes: 64", "max_nodes: 100001", false},
		{"duration without unit", "deadline: 20m", "deadline: 20", false},
		{"bad duration", "minimum: 60s", "minimum: 60 s", false},
		{"negative seconds", "value: 15s", "value: -1", false},
		{"gpu count not a number", "2: {mean: 32.0", "two: {mean: 32.0", false},
		{"two algorithms", "eta: 3}", "eta: 3}\n  hyperband: {min_iters: 1, max_iters: 9, eta: 3}", false},
		{"no objective", "objective: {metric: val_accuracy, mode: max}\n", "", false},
		{"bad checkpoints", "planner:", "checkpoints: ftp://host/dir\nplanner:", false},
		{"deadline 0", "deadline: 20m", "deadline: 0", true},
		{"seconds as a number", "value: 15s", "value: 15", true},
		{"numbers in strings", "DATASET: digits", "DATASET: 3", true},
		{"mixed choice values", "[64, 128, 256]", "[relu, 0.5, true]", true},
		{"checkpoints URL", "planner:", "checkpoints: s3://my-bucket/exp\nplanner:", true},
		{"checkpoints mapping", "planner:", "checkpoints: {url: s3://my-bucket/exp, endpoint: 127.0.0.1:9000, insecure: true}\nplanner:", true},
		{"stages", "sha: {trials: 32, min_iters: 1, max_iters: 50, eta: 3}", "stages: [{trials: 4, iters: 1}, {trials: 1, iters: 3}]", true},
		{"spot block", "max_nodes: 64", "max_nodes: 64\n  spot: {discount: 0.7, lifetimes: {dist: lognormal, mean: 2h, std: 1h}, notice: 2m, fallback: none}", true},
		{"spot discount 1", "max_nodes: 64", "max_nodes: 64\n  spot: {discount: 1}", false},
		{"spot rate above 60", "max_nodes: 64", "max_nodes: 64\n  spot: {interruptions_per_hour: 61}", false},
		{"bad fallback", "max_nodes: 64", "max_nodes: 64\n  spot: {fallback: wait}", false},
		{"ec2 block", "max_nodes: 64", "max_nodes: 64\n  ec2: {region: us-east-1, ami: ami-0123456789abcdef0, subnets: [subnet-0a1b2c3d], security_groups: [sg-0a1b2c3d], instance_profile: rb, tags: {team: ml}}", true},
		{"ec2 credentials", "max_nodes: 64", "max_nodes: 64\n  ec2: {ami: ami-0123456789abcdef0, subnets: [subnet-0a1b2c3d], secret_access_key: x}", false},
		{"ec2 bad ami", "max_nodes: 64", "max_nodes: 64\n  ec2: {ami: ami-1, subnets: [subnet-0a1b2c3d]}", false},
		{"ec2 no subnets", "max_nodes: 64", "max_nodes: 64\n  ec2: {ami: ami-0123456789abcdef0, subnets: []}", false},
		{"ec2 bad subnet", "max_nodes: 64", "max_nodes: 64\n  ec2: {ami: ami-0123456789abcdef0, subnets: [sn-0a1b2c3d]}", false},
		{"ec2 reserved tag", "max_nodes: 64", "max_nodes: 64\n  ec2: {ami: ami-0123456789abcdef0, subnets: [subnet-0a1b2c3d], tags: {AWS:x: y}}", false},
		{"ec2 Name tag", "max_nodes: 64", "max_nodes: 64\n  ec2: {ami: ami-0123456789abcdef0, subnets: [subnet-0a1b2c3d], tags: {Name: y}}", false},
		{"ec2 bad region", "max_nodes: 64", "max_nodes: 64\n  ec2: {region: Virginia, ami: ami-0123456789abcdef0, subnets: [subnet-0a1b2c3d]}", false},
		{"nomad block", "max_nodes: 64", "max_nodes: 64\n  nomad: {node_pool: gpu, datacenter: dc1, class: a100, meta: {team: ml}}", true},
		{"nomad empty", "max_nodes: 64", "max_nodes: 64\n  nomad: {}", false},
		{"nomad bad pool", "max_nodes: 64", "max_nodes: 64\n  nomad: {node_pool: a/b}", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if !strings.Contains(string(base), c.old) {
				t.Fatalf("full.yaml lacks %q", c.old)
			}
			data := []byte(strings.Replace(string(base), c.old, c.new, 1))
			_, parseErr := Parse("full.yaml", data, nil)
			schemaErr := sch.Validate(yamlToJSON(t, data))
			if (parseErr == nil) != c.ok || (schemaErr == nil) != c.ok {
				t.Errorf("want ok=%v; Parse: %v; schema: %v", c.ok, parseErr, schemaErr)
			}
		})
	}
}

// TestSchemaDescribesEveryField: every property has a description, so a new field without one
// fails here, and no description or rule names a field that is gone.
func TestSchemaDescribesEveryField(t *testing.T) {
	s, used := schema(BuiltinCatalog())
	var walk func(path string, s any)
	walk = func(path string, s any) {
		switch s := s.(type) {
		case []any:
			for _, sub := range s {
				walk(path, sub)
			}
		case map[string]any:
			if props, ok := s["properties"].(map[string]any); ok {
				for name, p := range props {
					if d, _ := p.(map[string]any)["description"].(string); d == "" {
						t.Errorf("%s%s has no description (add it to fieldDocs)", path, name)
					}
					walk(path+name+".", p)
				}
			}
			for _, k := range []string{"items", "additionalProperties", "oneOf"} {
				walk(path, s[k])
			}
			if pp, ok := s["patternProperties"].(map[string]any); ok {
				for _, p := range pp {
					walk(path+"N.", p)
				}
			}
		}
	}
	walk("", s)
	for _, keys := range [][]string{slices.Collect(maps.Keys(fieldDocs())), slices.Collect(maps.Keys(fieldRules(BuiltinCatalog())))} {
		for _, k := range keys {
			if !used[k] {
				t.Errorf("%q names no field of the spec", k)
			}
		}
	}
}

// kubernetesManifest says whether a YAML file holds Kubernetes objects: top-level apiVersion and
// kind lines.
func kubernetesManifest(data []byte) bool {
	text := "\n" + string(data)
	return strings.Contains(text, "\napiVersion: ") && strings.Contains(text, "\nkind: ")
}
