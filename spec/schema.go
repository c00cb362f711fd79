package spec

import (
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strings"
)

// SchemaDialect is the JSON Schema draft Schema declares.
const SchemaDialect = "https://json-schema.org/draft/2020-12/schema"

// goDuration matches what time.ParseDuration accepts, less a sign: no spec duration may be negative.
const goDuration = `^(0|(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$`

// Schema returns the JSON Schema of a spec file, for editors. It is generated from Experiment's
// fields by their yaml tags, so a field the decoder knows cannot be missing from it. It checks
// what one field alone can get wrong; `rubberband validate` remains the judge of the rest (which
// fields a dist uses, min_iters <= max_iters, ...). It uses no keyword newer than draft 7, so
// language servers that know only draft 7 read it the same.
func Schema() map[string]any { return SchemaFor(BuiltinCatalog()) }

// SchemaFor is Schema with cluster.instance_type drawn from cat (a local catalog file's rows
// over the built-in ones): the names `validate` accepts with that catalog.
func SchemaFor(cat InstanceCatalog) map[string]any {
	s, _ := schema(cat)
	return s
}

// schema also returns the keys of fieldDocs and fieldRules it used, so a test can find stale ones.
func schema(cat InstanceCatalog) (map[string]any, map[string]bool) {
	g := schemaGen{docs: fieldDocs(), rules: fieldRules(cat), used: map[string]bool{}}
	s := g.of(reflect.TypeFor[Experiment]())
	s["$schema"] = SchemaDialect
	s["title"] = "rubberband experiment spec"
	s["description"] = g.doc("Experiment")
	return s, g.used
}

// schemaGen walks Go types the way the decoder does (decode.go) and writes their schemas.
type schemaGen struct {
	docs  map[string]string         // "Type.field" -> description
	rules map[string]map[string]any // "Type" or "Type.field" -> keywords added to its schema
	used  map[string]bool
}

func (g schemaGen) doc(key string) string {
	g.used[key] = true
	return g.docs[key]
}

func (g schemaGen) of(t reflect.Type) map[string]any {
	// The decoder's own cases first, as decode checks them first.
	switch t {
	case reflect.TypeFor[Seconds]():
		return map[string]any{"oneOf": []any{
			map[string]any{"type": "number", "minimum": 0, "maximum": maxLatency},
			map[string]any{"type": "string", "pattern": goDuration},
		}}
	case reflect.TypeFor[Contention]():
		seconds := g.of(reflect.TypeFor[Seconds]())
		return map[string]any{"oneOf": []any{seconds, map[string]any{"type": "object", "additionalProperties": false,
			"patternProperties": map[string]any{"^[0-9]+$": seconds}}}}
	case reflect.TypeFor[Duration]():
		// A bare 0 is the one duration time.ParseDuration takes without a unit.
		return map[string]any{"oneOf": []any{
			map[string]any{"type": "string", "pattern": goDuration},
			map[string]any{"const": 0},
		}}
	case reflect.TypeFor[AnyOf]():
		scalar := map[string]any{"type": []string{"string", "number", "boolean"}}
		return map[string]any{"oneOf": []any{scalar, map[string]any{"type": "array", "items": scalar, "minItems": 1}}}
	case reflect.TypeFor[Checkpoints]():
		obj := g.object(t)
		url := obj["properties"].(map[string]any)["url"]
		return map[string]any{"oneOf": []any{url, obj}}
	}
	switch t.Kind() {
	case reflect.Pointer:
		return g.of(t.Elem())
	case reflect.Struct:
		return g.object(t)
	case reflect.Map:
		if t.Key().Kind() == reflect.Int { // YAML keys such as GPU counts
			return map[string]any{"type": "object", "additionalProperties": false,
				"patternProperties": map[string]any{"^[0-9]+$": g.of(t.Elem())}}
		}
		return map[string]any{"type": "object", "additionalProperties": g.of(t.Elem())}
	case reflect.Slice:
		return map[string]any{"type": "array", "items": g.of(t.Elem())}
	case reflect.String, reflect.Interface:
		// The decoder takes any scalar's text for a string: env: {N: 4} is fine.
		return map[string]any{"type": []string{"string", "number", "boolean"}}
	case reflect.Int:
		return map[string]any{"type": "integer", "minimum": math.MinInt32, "maximum": math.MaxInt32}
	case reflect.Int64:
		return map[string]any{"type": "integer"}
	case reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	}
	// Only a new field of a kind the decoder cannot decode either gets here; tests call Schema.
	panic(fmt.Sprintf("spec: no JSON Schema for %s", t))
}

func (g schemaGen) object(t reflect.Type) map[string]any {
	props := map[string]any{}
	for i := range t.NumField() {
		f := t.Field(i)
		name := strings.Split(f.Tag.Get("yaml"), ",")[0]
		if name == "" || name == "-" || !f.IsExported() { // as decodeStruct skips them
			continue
		}
		key := t.Name() + "." + name
		p := g.of(f.Type)
		g.merge(p, key)
		p["description"] = g.doc(key)
		props[name] = p
	}
	s := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	g.merge(s, t.Name())
	return s
}

func (g schemaGen) merge(s map[string]any, key string) {
	if r, ok := g.rules[key]; ok {
		g.used[key] = true
		for k, v := range r {
			s[k] = v
		}
	}
}

// oneOfStrings is an enumeration of strings.
func oneOfStrings(values ...string) map[string]any {
	return map[string]any{"type": "string", "enum": values}
}

func between(lo, hi int) map[string]any { return map[string]any{"minimum": lo, "maximum": hi} }

// fieldRules are the one-field checks of validate.go that a schema can state, and the fields
// validation requires. Their values come from the spec's constants where it has them.
func fieldRules(cat InstanceCatalog) map[string]map[string]any {
	var instances []string
	for _, it := range cat {
		instances = append(instances, it.Name)
	}
	atLeast0 := map[string]any{"minimum": 0}
	iters := between(1, MaxIters)
	// A count, or "grid": the grid sampler's size (minimum binds numbers, pattern strings).
	trialsOrGrid := map[string]any{"type": []string{"integer", "string"}, "minimum": 1, "maximum": MaxTrials, "pattern": "^grid$"}
	return map[string]map[string]any{
		// profile: measured by `rubberband profile`, which adds it. objective or objectives, not both.
		"Experiment": {"required": []string{"name", "algorithm", "cluster"},
			"oneOf": []map[string]any{{"required": []string{"objective"}}, {"required": []string{"objectives"}}}},
		"Experiment.objectives":              {"minItems": 1, "maxItems": MaxObjectives},
		"Experiment.constraints":             {"maxItems": MaxConstraints},
		"Constraint":                         {"required": []string{"metric"}, "minProperties": 2, "maxProperties": 2},
		"Experiment.name":                    {"type": "string", "pattern": nameRE().String()},
		"Objective":                          {"required": []string{"metric"}},
		"Objective.mode":                     oneOfStrings("max", "min"),
		"Algorithm":                          {"minProperties": 1, "maxProperties": 1},
		"SHA.trials":                         trialsOrGrid,
		"SHA.min_iters":                      iters,
		"SHA.max_iters":                      iters,
		"SHA.eta":                            between(2, 1000),
		"Hyperband.min_iters":                iters,
		"Hyperband.max_iters":                iters,
		"Hyperband.eta":                      between(2, 1000),
		"Hyperband.rounds":                   between(1, MaxRounds),
		"ASHA.trials":                        between(1, MaxTrials),
		"ASHA.min_iters":                     iters,
		"ASHA.max_iters":                     iters,
		"ASHA.eta":                           between(2, 1000),
		"ASHA.brackets":                      between(1, 64),
		"Algorithm.stages":                   {"minItems": 1},
		"StageSpec.trials":                   trialsOrGrid,
		"Sampler.name":                       oneOfStrings(SamplerRandom, SamplerGrid, SamplerSobol, SamplerTPE),
		"Sampler.grid_points":                between(1, MaxGridPoints),
		"Sampler.min_points":                 between(1, MaxTrials),
		"Sampler.random_fraction":            {"minimum": 0, "maximum": 1},
		"Sampler.candidates":                 between(1, 100_000),
		"Sampler.startup_trials":             between(0, MaxTrials),
		"Sampler.top_fraction":               {"exclusiveMinimum": 0, "exclusiveMaximum": 1},
		"Sampler.bandwidth_factor":           {"exclusiveMinimum": 0, "maximum": 100},
		"Sampler.min_bandwidth":              {"exclusiveMinimum": 0, "maximum": 1},
		"StageSpec.iters":                    iters,
		"Param":                              {"required": []string{"type"}},
		"Param.type":                         oneOfStrings("uniform", "loguniform", "int", "choice"),
		"Resources.cpu_mhz":                  between(0, 10_000_000),
		"Resources.memory_mb":                between(0, 100_000_000),
		"Cluster.instance_type":              oneOfStrings(instances...),
		"Cluster.gpus_per_node":              between(1, 1024),
		"Cluster.price_per_hour":             {"exclusiveMinimum": 0},
		"Cluster.spot_price_per_hour":        atLeast0,
		"Cluster.network_gbps":               atLeast0,
		"Cluster.market":                     oneOfStrings(MarketOnDemand, MarketSpot),
		"Cluster.max_nodes":                  between(1, 100_000),
		"Cluster.instance_types":             {"minItems": 1},
		"Cluster.markets":                    {"minItems": 1, "uniqueItems": true, "items": oneOfStrings(MarketOnDemand, MarketSpot)},
		"InstanceChoice":                     {"required": []string{"instance_type"}},
		"InstanceChoice.gpus_per_node":       between(1, 1024),
		"InstanceChoice.price_per_hour":      {"exclusiveMinimum": 0},
		"InstanceChoice.spot_price_per_hour": atLeast0,
		"InstanceChoice.network_gbps":        atLeast0,
		"Billing.model":                      oneOfStrings(PerInstance, PerFunction),
		"Data.size_gb":                       atLeast0,
		"Data.price_per_gb":                  atLeast0,
		"Dist.dist":                          oneOfStrings(DistConstant, DistNormal, DistLogNormal, DistUniform, DistEmpirical),
		"Dist.samples":                       {"minItems": 1},
		"PlannerOptions.name":                oneOfStrings(PlannerNames()...),
		"PlannerOptions.samples":             between(1, MaxSamples),
		"PlannerOptions.deadline_quantile":   {"exclusiveMinimum": 0, "maximum": 1},
		"Checkpoints.url":                    {"type": "string", "pattern": `^(file://.+|s3://.+)?$`},

		"Spot.price_per_hour":         atLeast0,
		"Spot.discount":               {"exclusiveMinimum": 0, "exclusiveMaximum": 1},
		"SlowNodes.share":             between(0, 1),
		"Budget.max_cost_usd":         between(0, MaxBudget),
		"SlowNodes.factor":            between(1, MaxSlowFactor),
		"Spot.interruptions_per_hour": between(0, MaxInterruptionsPerHour),
		"Spot.fallback":               oneOfStrings(FallbackOnDemand, FallbackNone),
		"Spot.on_notice":              oneOfStrings(OnNoticeCheckpoint, OnNoticeRestart),
		"EC2":                         {"required": []string{"ami", "subnets"}},
		"EC2.region":                  {"type": "string", "pattern": regionRE().String()},
		"EC2.ami":                     {"type": "string", "pattern": amiRE().String()},
		"EC2.subnets":                 idList(subnetRE(), 1, MaxSubnets),
		"EC2.security_groups":         idList(sgRE(), 0, MaxSecurityGroups),
		"EC2.instance_profile":        {"type": "string", "pattern": profileRE().String()},
		"EC2.key_name":                {"type": "string", "maxLength": MaxKeyNameLen},
		"EC2.tags": {"maxProperties": MaxEC2Tags,
			"propertyNames":        map[string]any{"minLength": 1, "maxLength": MaxTagKeyLen, "not": map[string]any{"pattern": reservedTagPattern}},
			"additionalProperties": map[string]any{"type": []string{"string", "number", "boolean"}, "maxLength": MaxTagValueLen}},
		"EC2.user_data":              {"type": "string", "maxLength": MaxUserDataBytes},
		"NomadPool":                  {"minProperties": 1},
		"NomadPool.node_pool":        {"type": "string", "pattern": nomadNameRE().String()},
		"NomadPool.datacenter":       {"type": "string", "pattern": nomadNameRE().String()},
		"NomadPool.class":            {"type": "string", "maxLength": MaxNomadNameLen},
		"NomadPool.meta":             {"maxProperties": MaxNomadMeta, "propertyNames": map[string]any{"pattern": nomadMetaKeyRE().String()}},
		"Kubernetes.namespace":       {"type": "string", "pattern": dns1123LabelRE().String()},
		"Kubernetes.lease_namespace": {"type": "string", "pattern": dns1123LabelRE().String()},
		"Kubernetes.service_account": {"type": "string", "pattern": dns1123LabelRE().String()},
		"Kubernetes.trainer_secret":  {"type": "string", "pattern": dns1123LabelRE().String()},
		"Kubernetes.nodes":           oneOfStrings(KubeNodesPool, KubeNodesKarpenter),
		"Kubernetes.image":           {"type": "string", "maxLength": MaxKubeImage},
		"Kubernetes.node_selector": {"maxProperties": MaxKubeSelector, "propertyNames": map[string]any{"pattern": labelKeyRE().String()},
			"additionalProperties": map[string]any{"type": "string", "pattern": labelValueRE().String()}},
		"NodeClassRef":       {"required": []string{"group", "kind", "name"}},
		"NodeClassRef.group": {"type": "string", "pattern": kubeGroupRE().String()},
		"NodeClassRef.kind":  {"type": "string", "pattern": kubeKindRE().String()},
		"NodeClassRef.name":  {"type": "string", "pattern": dns1123LabelRE().String()},
	}
}

// reservedTagPattern matches the EC2 tag keys reservedTag refuses.
const reservedTagPattern = `^([aA][wW][sS]:|rubberband:|Name$)`

// idList is a list of unique resource ids.
func idList(re *regexp.Regexp, lo, hi int) map[string]any {
	return map[string]any{"minItems": lo, "maxItems": hi, "uniqueItems": true, "items": map[string]any{"type": "string", "pattern": re.String()}}
}

// fieldDocs describes every field; a test fails for a field without a description.
func fieldDocs() map[string]string {
	return map[string]string{
		"Experiment":              "An experiment: what to tune, with which algorithm, on which cluster, by when. Check one with `rubberband validate`.",
		"Experiment.name":         "The experiment's name: lowercase letters, digits and '-'.",
		"Experiment.deadline":     "When the job must end, as a Go duration (20m, 1h30m); plan needs it or --deadline.",
		"Experiment.seed":         "Seeds search-space sampling and the simulator (default 0).",
		"Experiment.objective":    "The metric that ranks trials at each sync (or objectives, for several).",
		"Experiment.objectives":   "Several metrics to rank by: trials are promoted by Pareto dominance then crowding (MO-ASHA's rule), and best prints the Pareto front. cost_usd is the trial's own metered dollars.",
		"Experiment.constraints":  "Bounds a configuration must keep within ({metric, max} or {metric, min}): feasible results rank before every infeasible one.",
		"Experiment.algorithm":    "Exactly one of sha, hyperband, asha or stages.",
		"Experiment.search_space": "The parameters to tune, by name.",
		"Experiment.trainer":      "The program each trial runs (used by run).",
		"Experiment.cluster":      "The instances a plan rents and what they cost.",
		"Experiment.profile":      "The model's scaling profile, inline or {file: profile.yaml} relative to the spec.",
		"Experiment.planner":      "Which planner, and how it samples.",
		"Experiment.checkpoints":  "Where checkpoints are kept: file://DIR (default: the run's state directory) or s3://BUCKET/PREFIX, alone or as a mapping with S3 options.",

		"Objective.metric": "The metric the trainer reports, such as val_accuracy.",
		"Objective.mode":   "Whether a higher (max, the default) or lower (min) metric is better.",

		"Constraint.metric": "A metric the trainer reports, or cost_usd (the trial's metered dollars).",
		"Constraint.max":    "The largest value that satisfies the constraint.",
		"Constraint.min":    "The smallest value that satisfies the constraint.",

		"Algorithm.sha":       "Successive Halving: trials start with min_iters iterations; 1/eta of them go on at each sync, up to max_iters.",
		"Algorithm.hyperband": "Hyperband: several SHA brackets run at once on one elastic cluster.",
		"Algorithm.stages":    "Explicit stages, each keeping no more trials than the one before.",
		"Algorithm.asha":      "Asynchronous successive halving: a trial goes on to the next rung as soon as it is in the top 1/eta of its rung's results so far; no barriers.",
		"ASHA.trials":         "Trials started at rung 0, in all brackets together.",
		"ASHA.min_iters":      "Iterations of the first rung (bracket 0's).",
		"ASHA.max_iters":      "Iterations of the last rung: what the best trials train in all.",
		"ASHA.eta":            "Reduction factor: a trial is promoted while in the top 1/eta of its rung.",
		"ASHA.brackets":       "Brackets of different early-stopping rates run side by side (default 1); trial i goes to bracket i mod brackets.",

		"SHA.trials":          "Trials in the first stage, or grid: the grid sampler's size.",
		"SHA.min_iters":       "Iterations each trial trains in the first stage.",
		"SHA.max_iters":       "Iterations the best trial trains in all.",
		"SHA.eta":             "Reduction factor: 1/eta of the trials survive each sync.",
		"Hyperband.min_iters": "The fewest iterations of any bracket's first stage.",
		"Hyperband.max_iters": "Iterations the best trial of each bracket trains in all.",
		"Hyperband.eta":       "Reduction factor of every bracket.",
		"StageSpec.trials":    "Trials in this stage.",
		"StageSpec.iters":     "Iterations each trial trains in this stage, on top of earlier stages'.",

		"Param.type":               "uniform, loguniform (min above 0), int (min and max included) or choice (values).",
		"Param.min":                "The smallest value (not for choice).",
		"Param.max":                "The largest value (not for choice).",
		"Param.values":             "The values a choice picks from.",
		"Hyperband.rounds":         "Hyperband iterations run one after another (default 1): an adaptive sampler draws each from the results of those before (BOHB).",
		"Param.when":               "Makes the parameter conditional: {PARAM: VALUE or [VALUES]} names choice parameters and the values under which it is active; inactive, it is left out of the trial's configuration.",
		"Experiment.sampler":       "How trials' configurations are drawn: random (default), grid, sobol or tpe.",
		"Sampler.name":             "random (default: each parameter uniformly), grid (every combination of grid_points values per numeric parameter and each choice), sobol (scrambled Sobol points) or tpe (BOHB's model, fitted on the results so far).",
		"Sampler.seed":             "Seeds the sampler apart from the experiment's seed (default: seed).",
		"Sampler.grid_points":      "grid: values per numeric parameter, evenly spaced (log-spaced for loguniform); default 3.",
		"Sampler.min_points":       "tpe: results a budget needs before a model is fitted on it (default: parameters + 1).",
		"Sampler.random_fraction":  "tpe: the share of draws kept random (default 0.1).",
		"Sampler.candidates":       "tpe: candidates drawn from the good density and ranked by the density ratio (default 64).",
		"Sampler.startup_trials":   "tpe: trials drawn at random before any model is used (default 0: random until a budget has min_points results).",
		"Sampler.top_fraction":     "tpe: the share of a budget's results that make up the good density (default 0.15).",
		"Sampler.bandwidth_factor": "tpe: how much wider the good density is when candidates are drawn from it (default 3).",
		"Sampler.multivariate":     "tpe: one joint density over all parameters, as BOHB (default false with one objective: one density per parameter, as Optuna's TPE, which searched better on search-bench; true with several objectives, which searched better there).",
		"Sampler.warm_start":       "tpe: earlier runs under the root (names or IDs) whose results the model learns from first; the parameters they share with this space count, the rest are ignored (validate says which).",
		"Sampler.min_bandwidth":    "tpe: the smallest bandwidth, on parameters scaled to [0, 1] (default 0.001).",

		"Trainer.command":   "The command each trial's workers run; with image, the command inside it.",
		"Trainer.image":     "A container image to run the command in (the Nomad docker driver).",
		"Trainer.env":       "Environment variables for the trainer.",
		"Trainer.resources": "What each worker asks a cluster scheduler for besides its GPUs.",
		"Trainer.timeout":   "One launch's time budget, a Go duration; default three times its predicted p99.9 plus a minute.",
		"Trainer.workdir":   "The folder the command runs in, on every backend (relative paths in the command resolve there); default the spec file's folder, and a relative path resolves against it. Its files travel with the run to a server and to remote workers (.gitignore and .rbignore respected, at most 100 MiB; docs/trainers.md).",
		"Trainer.reuse":     "Let one process of a single-worker trainer serve one trial after another (the trainer contract's RB_REUSE): its start-up is paid once per GPU, not per launch. Local backend only.",

		"Resources.cpu_mhz":   "CPU per worker in MHz (default 500).",
		"Resources.memory_mb": "Memory per worker in MB (default 512).",

		"Cluster.instance_type":              "A catalog instance type: fills gpus_per_node, price_per_hour, spot_price_per_hour, gpu_model and network_gbps, each of which may still be set.",
		"Cluster.gpu_model":                  "The GPU model, for reports.",
		"Cluster.gpus_per_node":              "GPUs per node.",
		"Cluster.price_per_hour":             "On-demand dollars per node-hour.",
		"Cluster.spot_price_per_hour":        "Spot dollars per node-hour: the same value as spot.price_per_hour (give one).",
		"Cluster.network_gbps":               "Each node's network bandwidth in Gbit/s, for the dataset download.",
		"Cluster.market":                     "on-demand (the default) or spot (which needs a spot price: spot.price_per_hour, spot.discount or the catalog's).",
		"Cluster.billing":                    "How rented time turns into dollars.",
		"Cluster.scale_latency":              "From requesting an instance to it running (not billed).",
		"Cluster.init_latency":               "From running to ready for trials (billed).",
		"Cluster.max_nodes":                  "The most nodes a plan may rent at once (default 64).",
		"Cluster.data":                       "The dataset each new node downloads once.",
		"Cluster.spot":                       "The spot market: its price (or a discount off on-demand), interruptions, notice and fallback; read whatever the market.",
		"Cluster.ec2":                        "Where and how to rent instances on EC2 (--backend ec2): region, AMI, subnets, security groups, instance profile, key pair, tags, user-data. Credentials come from the AWS SDK's chain, never from the spec.",
		"Cluster.instance_types":             "Candidate instance types: the planner gives each stage one of them (and a market), at least cost under the deadline. Each candidate's fields left out come from the catalog, the cluster (latencies, spot.discount) and the spec's profile. instance_type is then the default type (default: the first candidate).",
		"Cluster.markets":                    "The markets the planner may give each stage: on-demand, spot or both (default: market alone). Spot nodes follow the spot block's interruptions; on-demand ones are never interrupted.",
		"Cluster.hedge":                      "With both markets: whether the planner may also split a spot stage's nodes between them (default true), some on demand for the gangs that take longest and as standby room that an interrupted gang moves to, the rest on spot. The plan's stages say how many (on_demand_nodes).",
		"InstanceChoice.instance_type":       "The instance type's name, as the provider rents it; a catalog name fills the fields below.",
		"InstanceChoice.gpu_model":           "The GPU model, for reports.",
		"InstanceChoice.gpus_per_node":       "GPUs per node of this type.",
		"InstanceChoice.price_per_hour":      "On-demand dollars per node-hour of this type.",
		"InstanceChoice.spot_price_per_hour": "Spot dollars per node-hour of this type (default: cluster.spot.discount off price_per_hour, else the catalog's).",
		"InstanceChoice.network_gbps":        "This type's network bandwidth in Gbit/s, for the dataset download.",
		"InstanceChoice.scale_latency":       "From requesting an instance of this type to it running (default: the cluster's).",
		"InstanceChoice.init_latency":        "From running to ready for trials on this type (default: the cluster's).",
		"InstanceChoice.profile":             "The model's scaling profile on this type, a file (`rubberband profile --instance-type T --out F`) or inline (default: the spec's profile).",
		"Cluster.nomad":                      "Filters selecting a team's existing Nomad clients (--backend nomad, with NOMAD_ADDR): node pool, datacenter, class, meta.",
		"Cluster.kubernetes":                 "Where on a Kubernetes cluster the run's pods and nodes are (--backend kube): namespace, a node pool or Karpenter NodeClaims: docs/kubernetes.md.",

		"Spot.price_per_hour":         "Spot dollars per node-hour; the same value as cluster.spot_price_per_hour (give one), or use discount.",
		"Spot.discount":               "The fraction off the on-demand price, above 0 and below 1 (0.7: spot costs 30% of price_per_hour); instead of a spot price.",
		"Spot.interruptions_per_hour": "How often one node is interrupted, per hour (0 to 60); or give lifetimes.",
		"Spot.lifetimes":              "The distribution of a spot instance's lifetime (seconds, or Go durations); instead of interruptions_per_hour.",
		"Spot.notice":                 "The warning before an interruption, a Go duration (default 2m, at most 1h).",
		"Spot.on_notice":              "What an interrupted trial keeps: checkpoint (the default: it checkpoints within the notice and loses nothing) or restart (the launch's work is lost).",
		"Spot.fallback":               "What to rent when no spot capacity is left: on-demand (the default) or none (wait for spot).",

		"EC2.region":           "The AWS region, such as us-east-1; default the SDK's (AWS_REGION, shared config).",
		"EC2.ami":              "The AMI every instance boots (ami-...): it must hold Nomad and rubberband.",
		"EC2.subnets":          "Subnet ids (subnet-...), one per availability zone, tried in order when a zone has no capacity.",
		"EC2.security_groups":  "More security group ids (sg-...) for the instances, beside the run's own, which the driver makes and deletes.",
		"EC2.instance_profile": "An IAM instance profile, by name or ARN, giving instances their credentials (for s3:// checkpoints).",
		"EC2.key_name":         "An EC2 key pair for SSH access.",
		"EC2.tags":             "Extra tags on every instance and volume (at most 40; keys not starting with aws: or rubberband:, not Name).",
		"EC2.user_data":        "Extra shell run after rubberband's own user-data (at most 8 KiB).",
		"EC2.watchdog":         "How long an instance goes on without its driver's heartbeat before it shuts itself down and is terminated, a Go duration (default 15m, 30s to 24h).",

		"NomadPool.node_pool":  "The node pool of the clients to use; jobs run in it.",
		"NomadPool.datacenter": "The datacenter of the clients to use.",
		"NomadPool.class":      "The node class of the clients to use.",
		"NomadPool.meta":       "Node meta values the clients must carry, by key.",

		"Kubernetes.namespace":       "The namespace of the run's pods, Secret and Leases; default the kubeconfig context's (in a pod: its own).",
		"Kubernetes.nodes":           "Where nodes come from: pool (the default: existing nodes chosen by node_selector) or karpenter (a NodeClaim per node).",
		"Kubernetes.node_selector":   "Labels a node of the pool must carry (pool), such as {rubberband.dev/pool: gpu}.",
		"Kubernetes.lease_namespace": "The namespace of the Leases by which runs claim pool nodes; runs sharing a pool must share it (default: namespace).",
		"Kubernetes.node_class":      "The NodeClaims' nodeClassRef (karpenter): the cloud's node class.",
		"Kubernetes.service_account": "The ServiceAccount the trainers' pods run as (default: default).",
		"Kubernetes.image":           "The image of a command trainer's pods, holding rubberband at /rubberband and what the trainer needs (an image trainer's run trainer.image).",
		"Kubernetes.trainer_secret":  "A Secret of the namespace whose keys reach the trainer as environment variables, never written into a pod spec.",
		"NodeClassRef.group":         "The node class's API group, such as karpenter.k8s.aws.",
		"NodeClassRef.kind":          "The node class's kind, such as EC2NodeClass.",
		"NodeClassRef.name":          "The node class's name.",

		"Billing.model":     "per-instance (the default) or per-function.",
		"Billing.increment": "Billed time is rounded up to this, a Go duration (default 1s).",
		"Billing.minimum":   "The least time billed per node, a Go duration (per-instance default 1m).",

		"Data.size_gb":      "Dataset size in GB.",
		"Data.price_per_gb": "Dollars per GB downloaded.",

		"Profile.file":               "A YAML file holding the profile, relative to the spec; then iter_latency, startup_latency, launch_overhead, first_stage_lag and startup_contention are left out here.",
		"Profile.iter_latency":       "Seconds per iteration of one trial on N GPUs, by N; 1 GPU is required.",
		"Profile.startup_latency":    "Seconds per training launch before its first iteration (restore, connect).",
		"Profile.launch_overhead":    "Seconds each training launch costs the run path beyond its start-up and iterations (checkpoint saved, the launch placed and journaled), added to every trial of every stage (default 0; `rubberband profile` measures it).",
		"Profile.first_stage_lag":    "Seconds by which the job's first stage starts late, once: its first wave of launches starts all at once on fresh nodes (default 0; `rubberband profile` measures it).",
		"Profile.startup_contention": "Seconds by which each of several launches at once starts later than the one before it (the last of k waits k-1 times this), for the trials a stage launches together: one for every launch, or by the launches' GPU count, as `rubberband profile` writes it (default 0).",
		"Profile.notes":              "Where the numbers come from.",
		"Experiment.budget":          "What the job may cost: plan and run refuse a plan over it, and a run re-plans (or stops) when its forecast goes over it.",
		"Budget.max_cost_usd":        "The most the job may cost, in dollars (0 to 10,000,000; 0: no cap): a plan whose predicted mean cost is over it is refused (exit 3).",
		"Budget.stop":                "During a run, when the forecast final cost goes over max_cost_usd: true stops the run cleanly at the next sync (resume carries on); false (the default) re-plans for the budget and lets the deadline give way.",
		"Profile.slow_nodes":         "Persistent stragglers: the share of nodes (0 to 1) that run every trial factor times slower (1 to 100), for their whole life.",
		"SlowNodes.share":            "The share of nodes that are slow, 0 to 1 (each node is, with this probability).",
		"SlowNodes.factor":           "How many times longer a trial takes on a slow node, 1 to 100.",

		"Dist.dist":    "constant (value), normal or lognormal (mean, std), uniform (min, max) or empirical (samples); left out, the fields given decide.",
		"Dist.value":   "The constant latency: seconds, or a Go duration such as 15s.",
		"Dist.mean":    "The mean latency: seconds, or a Go duration.",
		"Dist.std":     "The latency's standard deviation: seconds, or a Go duration.",
		"Dist.min":     "The least latency of a uniform: seconds, or a Go duration.",
		"Dist.max":     "The greatest latency of a uniform: seconds, or a Go duration.",
		"Dist.samples": "Measured latencies, each equally likely: seconds, or Go durations.",

		"PlannerOptions.name":              "The planner (default greedy).",
		"PlannerOptions.samples":           "Simulated runs per plan evaluated (default 100).",
		"PlannerOptions.deadline_quantile": "The quantile of the job's duration that must meet the deadline (default 0.5, the median).",

		"Checkpoints.url":      "file://DIR or s3://BUCKET/PREFIX.",
		"Checkpoints.endpoint": "host:port of an S3-compatible server such as MinIO; empty means AWS S3.",
		"Checkpoints.insecure": "Talk plain HTTP to the endpoint.",
		"Checkpoints.region":   "The S3 region.",
	}
}
