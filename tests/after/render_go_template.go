// Renders an Ollama TEMPLATE with Go's own text/template, from the data Ollama passes
// (.Messages with .Role, .Content and .Thinking, .System, .Prompt, .Response): the tests
// compare what it prints with the Jinja template's rendering of the same conversation.
// Reads {"template": T, "data": D} on stdin, prints the rendering.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"text/template"
)

type Message struct {
	Role     string
	Content  string
	Thinking string
}

type Data struct {
	Messages []Message
	System   string
	Prompt   string
	Response string
}

type Input struct {
	Template string
	Data     Data
}

func main() {
	var input Input
	if err := json.NewDecoder(os.Stdin).Decode(&input); err != nil {
		fmt.Fprintln(os.Stderr, "bad input:", err)
		os.Exit(2)
	}
	parsed, err := template.New("ollama").Parse(input.Template)
	if err != nil {
		fmt.Fprintln(os.Stderr, "parse:", err)
		os.Exit(1)
	}
	if err := parsed.Execute(os.Stdout, input.Data); err != nil {
		fmt.Fprintln(os.Stderr, "execute:", err)
		os.Exit(1)
	}
}
