package harness

import "strconv"

// maxShellNesting bounds how deeply a shell line may nest before it is
// parsed. The parser (mvdan.cc/sh) descends once for each level of
// brackets, compound commands and command substitutions, and once for
// each operator of a chain (a && b && …, a | b | …, 1+1+… in arithmetic),
// with no bound of its own: a line of a few hundred kilobytes of "(" took
// a goroutine's stack past Go's limit, which is fatal to the whole process
// (a daemon and every session in it) and no recover catches. A line past
// the bound is not parsed: it counts as hiding what it runs.
const maxShellNesting = 2000

// shellNesting estimates, without parsing src, how deep the parser would
// descend in it: the deepest its brackets ( { [ and backquotes nest, plus
// the compound commands (if, while, until, for, case, select) opened and
// not yet closed, plus the longest chain of |, & and ! in one line or
// statement, and of operators in arithmetic. Quotes are not read: what
// they hold counts too (a quote is easily left open where the parser
// sees none, in a here-document), so it errs high, never low.
func shellNesting(src string) int {
	depth, maxDepth, keywords, chain, maxChain := 0, 0, 0, 0, 0
	arith := -1 // the depth at which arithmetic began, or -1
	inBq := false
	word := -1 // start of the word of letters being read, or -1
	endWord := func(i int) {
		if word < 0 {
			return
		}
		switch src[word:i] {
		case "if", "while", "until", "for", "case", "select":
			keywords++
		case "fi", "done", "esac":
			keywords = max(keywords-1, 0)
		}
		word = -1
	}
	for i := 0; i < len(src); i++ {
		c := src[i]
		if c >= 'a' && c <= 'z' {
			if word < 0 {
				word = i
			}
			continue
		}
		endWord(i)
		switch c {
		case '(':
			if arith < 0 && i+1 < len(src) && src[i+1] == '(' {
				arith = depth
			}
			depth++
		case '{', '[':
			depth++
		case '`':
			if inBq {
				depth = max(depth-1, 0)
			} else {
				depth++
			}
			inBq = !inBq
		case ')', '}', ']':
			depth = max(depth-1, 0)
			if depth <= arith {
				arith = -1
			}
		case '|', '&', '!':
			chain++
		case ';', '\n':
			if arith < 0 {
				chain = 0
			}
		case '+', '-', '*', '/', '%', '<', '>', '=', '^', ',', '?', ':', '~':
			if arith >= 0 {
				chain++
			}
		}
		maxChain = max(maxChain, chain)
		maxDepth = max(maxDepth, depth+keywords)
	}
	endWord(len(src))
	return maxDepth + maxChain
}

// tooNested says why src is not parsed, or "".
func tooNested(src string) string {
	if n := shellNesting(src); n > maxShellNesting {
		return "the shell line nests deeper than moat reads (about " + strconv.Itoa(n) + " levels, past " + strconv.Itoa(maxShellNesting) + ")"
	}
	return ""
}
