module github.com/moatbox/moat

go 1.26.8

require (
	github.com/landlock-lsm/go-landlock v0.11.2 // indirect
	github.com/pelletier/go-toml/v2 v2.4.3 // indirect
	golang.org/x/sys v0.50.0 // indirect
)
