package ptx

import "fmt"

type tokenKind int

const (
	tokEOF tokenKind = iota
	tokError
	tokDirective // .name
	tokIdent     // name, %reg, $label
	tokNumber
	tokString
	tokPunct
)

type token struct {
	kind tokenKind
	text string
	line int
}

func (t token) describe() string {
	switch t.kind {
	case tokEOF:
		return "end of file"
	case tokError:
		return t.text
	}
	s := t.text
	if len(s) > 40 {
		s = s[:40] + "..."
	}
	return fmt.Sprintf("%q", s)
}

// lexer splits PTX into tokens, skipping whitespace and comments.
type lexer struct {
	src  []byte
	pos  int
	line int
}

func isIdentStart(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == '$' || c == '%'
}

func isIdentChar(c byte) bool {
	return isIdentStart(c) || c >= '0' && c <= '9'
}

func (l *lexer) next() token {
	for l.pos < len(l.src) {
		c := l.src[l.pos]
		switch {
		case c == '\n':
			l.line++
			l.pos++
		case c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v' || c == 0:
			l.pos++
		case c == '/' && l.pos+1 < len(l.src) && l.src[l.pos+1] == '/':
			for l.pos < len(l.src) && l.src[l.pos] != '\n' {
				l.pos++
			}
		case c == '/' && l.pos+1 < len(l.src) && l.src[l.pos+1] == '*':
			start := l.line
			l.pos += 2
			for {
				if l.pos+1 >= len(l.src) {
					l.pos = len(l.src)
					return token{kind: tokError, text: fmt.Sprintf("comment opened on line %d is never closed", start), line: start}
				}
				if l.src[l.pos] == '*' && l.src[l.pos+1] == '/' {
					l.pos += 2
					break
				}
				if l.src[l.pos] == '\n' {
					l.line++
				}
				l.pos++
			}
		default:
			return l.scan()
		}
	}
	return token{kind: tokEOF, line: l.line}
}

func (l *lexer) scan() token {
	start, c := l.pos, l.src[l.pos]
	line := l.line
	switch {
	case c == '.' && l.pos+1 < len(l.src) && isIdentStart(l.src[l.pos+1]):
		l.pos++
		for l.pos < len(l.src) && isIdentChar(l.src[l.pos]) {
			l.pos++
		}
		return token{kind: tokDirective, text: string(l.src[start:l.pos]), line: line}
	case isIdentStart(c):
		for l.pos < len(l.src) && isIdentChar(l.src[l.pos]) {
			l.pos++
		}
		return token{kind: tokIdent, text: string(l.src[start:l.pos]), line: line}
	case c >= '0' && c <= '9' || c == '-' || c == '.':
		l.pos++
		for l.pos < len(l.src) && (isIdentChar(l.src[l.pos]) || l.src[l.pos] == '.') {
			l.pos++
		}
		return token{kind: tokNumber, text: string(l.src[start:l.pos]), line: line}
	case c == '"':
		l.pos++
		for l.pos < len(l.src) && l.src[l.pos] != '"' {
			if l.src[l.pos] == '\n' {
				return token{kind: tokError, text: "string not closed before end of line", line: line}
			}
			l.pos++
		}
		if l.pos >= len(l.src) {
			return token{kind: tokError, text: "string not closed", line: line}
		}
		l.pos++
		return token{kind: tokString, text: string(l.src[start:l.pos]), line: line}
	default:
		l.pos++
		return token{kind: tokPunct, text: string(c), line: line}
	}
}
