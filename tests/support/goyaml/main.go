// goyaml: the tests' oracle for how Kubernetes reads YAML. It reads a stream with go-yaml v2
// (Debian's golang-gopkg-yaml.v2-dev, the go-yaml that sigs.k8s.io/yaml reads with) and turns
// each document into JSON as sigs.k8s.io/yaml's YAMLToJSON does (map keys converted as its
// convertToJSONableObject converts them, then encoding/json).
//
// Line protocol, one request a line on stdin, one answer a line on stdout:
//   request: a JSON string, the input's text
//   answer:  {"docs":[DOC,...]} (an empty document is null) or {"error":"..."}
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"reflect"
	"strconv"
	"strings"

	yaml "gopkg.in/yaml.v2"
)

// toJSONable is sigs.k8s.io/yaml's convertToJSONableObject with no target type: mappings
// become map[string]interface{} with keys as it writes them; anything else is kept.
func toJSONable(v interface{}) (interface{}, error) {
	switch t := v.(type) {
	case map[interface{}]interface{}:
		out := make(map[string]interface{}, len(t))
		for k, val := range t {
			var key string
			switch tk := k.(type) {
			case string:
				key = tk
			case int:
				key = strconv.Itoa(tk)
			case int64:
				key = strconv.FormatInt(tk, 10)
			case float64:
				s := strconv.FormatFloat(tk, 'g', -1, 32)
				switch s {
				case "+Inf":
					s = ".inf"
				case "-Inf":
					s = "-.inf"
				case "NaN":
					s = ".nan"
				}
				key = s
			case bool:
				if tk {
					key = "true"
				} else {
					key = "false"
				}
			default:
				return nil, fmt.Errorf("Unsupported map key of type: %s, key: %+#v, value: %+#v",
					reflect.TypeOf(k), k, val)
			}
			c, err := toJSONable(val)
			if err != nil {
				return nil, err
			}
			out[key] = c
		}
		return out, nil
	case []interface{}:
		out := make([]interface{}, len(t))
		for i, val := range t {
			c, err := toJSONable(val)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	default:
		return v, nil
	}
}

func decode(text string) (docs []json.RawMessage, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	dec := yaml.NewDecoder(strings.NewReader(text))
	for {
		var v interface{}
		if err := dec.Decode(&v); err == io.EOF {
			break
		} else if err != nil {
			return nil, err
		}
		c, err := toJSONable(v)
		if err != nil {
			return nil, err
		}
		b, err := json.Marshal(c)
		if err != nil {
			return nil, err
		}
		docs = append(docs, b)
	}
	if docs == nil {
		docs = []json.RawMessage{}
	}
	return docs, nil
}

func main() {
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	out := bufio.NewWriter(os.Stdout)
	enc := json.NewEncoder(out)
	for {
		line, err := in.ReadBytes('\n')
		if len(line) == 0 && err != nil {
			return
		}
		var text string
		if jerr := json.Unmarshal(line, &text); jerr != nil {
			enc.Encode(map[string]string{"error": "bad request: " + jerr.Error()})
		} else if docs, derr := decode(text); derr != nil {
			enc.Encode(map[string]string{"error": derr.Error()})
		} else {
			enc.Encode(map[string][]json.RawMessage{"docs": docs})
		}
		out.Flush()
	}
}
