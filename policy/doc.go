// Package policy is moat's user-facing policy model: what a run may see,
// write, reach and spend, as the user wrote it.
//
// It owns
//
//   - the schema: the Go structs in this package are the source of truth, and
//     every field documents its default;
//   - the built-in policy ([Default]), which is the safe choice for every
//     field;
//   - parsing TOML ([Load], [Parse]) strictly: an unknown key, a value of the
//     wrong type or a malformed size or duration is an error naming the file,
//     the line and the dotted field;
//   - validation ([Policy.Validate]), which reports every problem at once,
//     each pointing at the file line or the command-line flag the value came
//     from ([Policy.MarkFlag]);
//   - the [[rules]] of the harness ([Rule]): read and checked here, each
//     rule's examples run by Validate; package harness evaluates them;
//   - the overrides of one run ([Overrides]): the flags of `moat run`, or
//     the same options of an API request, applied with the same rules and
//     errors naming the option, whoever the caller;
//   - resolution of relative and "~/" paths ([Policy.Resolve]) and rendering of
//     the effective policy ([Policy.TOML]);
//   - trust of a policy file found in a workspace ([Trust]): such a file, and
//     every file it loads, is used only with the content a person trusted.
//
// It refuses to know anything about the kernel: it makes no system call apart
// from reading files (the policy, the files it loads, the trust record; the
// caller stores the record), and it never decides whether the host
// can enforce a policy. Compiling a Policy into what a backend executes is the
// sandbox package's job.
package policy
