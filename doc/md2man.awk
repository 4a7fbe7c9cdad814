# Prepares a man page source (doc/*.[0-9].md) for pandoc's man writer.
# usage: awk -v version=X -v docdir=DIR -f md2man.awk page.md | pandoc ... -t man
#
# * "@VERSION@" becomes the package version.
# * A line "<!-- include FILE from "Heading" -->" is replaced by FILE (in
#   docdir) from its "## Heading" on (without 'from': from its first "##"),
#   so the reference pages in doc/ are not copied by hand. In included text
#   "## x" becomes a man section (.SH, upper case except names such as
#   [pgbouncer] or userlist.txt) and "### x" a subsection.
# * A line "<!-- extensions FILE -->" becomes a list of the settings whose
#   row in FILE's settings table is marked **pgcrew**.
# * Pipe tables become definition lists: wide tables do not fit a terminal,
#   and groff warns about them. The settings table (key | type | default |
#   reload | meaning) gets one entry per key with its type and default.

BEGIN { in_fence = 0; pending = ""; ncols = 0 }

function trim(s) { sub(/^[ \t]+/, "", s); sub(/[ \t]+$/, "", s); return s }

# Split a table row into cells[1..n]; "\|" is a literal bar. Returns n.
function split_row(line, cells,    n, i, parts, m) {
	gsub(/\\\|/, "\001", line)
	line = trim(line)
	sub(/^\|/, "", line)
	sub(/\|$/, "", line)
	m = split(line, parts, "|")
	n = 0
	for (i = 1; i <= m; i++) {
		n++
		cells[n] = trim(parts[i])
		gsub(/\001/, "|", cells[n])
	}
	return n
}

function is_separator(line) { return line ~ /^[ \t]*\|[ \t:|-]+\|[ \t]*$/ && line ~ /---/ }

function upcase_heading(s,    n, i, w, out) {
	n = split(s, w, " ")
	out = ""
	for (i = 1; i <= n; i++) {
		if (w[i] !~ /[][`._]/)
			w[i] = toupper(w[i])
		out = out (i > 1 ? " " : "") w[i]
	}
	return out
}

# A sentence from a table cell: capital first letter unless the first word
# is a name (contains _, ., ( or `), and a final period.
function sentence(s,    first) {
	if (s == "")
		return s
	first = s
	sub(/[ \t].*/, "", first)
	if (first ~ /^[a-z][a-z-]*$/)
		s = toupper(substr(s, 1, 1)) substr(s, 2)
	if (s !~ /\.$/)
		s = s "."
	return s
}

function unquote(s) { gsub(/`/, "", s); return s }

function emit_row(n, cells,    term, body, def, meaning, ext, i) {
	if (settings_table) {
		meaning = cells[5]
		ext = 0
		if (meaning ~ /^\*\*pgcrew\*\* /) {
			ext = 1
			sub(/^\*\*pgcrew\*\* /, "", meaning)
		}
		def = cells[3] == "(empty)" ? "empty" : cells[3]
		print "**" unquote(cells[1]) "** (*" cells[2] "*)"
		print ":   " sentence(meaning)
		print "    Default: " def ". Reload: " cells[4] "." (ext ? " A pgcrew extension." : "")
		print ""
		return
	}
	term = cells[1]
	body = ""
	for (i = 2; i < n; i++)
		if (cells[i] != "")
			body = body header[i] ": " cells[i] ". "
	if (n >= 2)
		body = body cells[n]
	if (body == "")
		body = "\\ "
	print term
	print ":   " body
	print ""
}

function start_table(hline,    i) {
	ncols = split_row(hline, header)
	settings_table = (ncols == 5 && header[1] == "key" && header[3] == "default")
	print ""
}

# One line of Markdown, with table state kept across calls.
function put(line,    n, cells) {
	if (line ~ /^[ \t]*```/) {
		flush_pending()
		in_fence = !in_fence
		print line
		return
	}
	if (in_fence) {
		print line
		return
	}
	if (ncols > 0) {
		if (line ~ /^[ \t]*\|/) {
			n = split_row(line, cells)
			emit_row(n, cells)
			return
		}
		ncols = 0
	}
	if (pending != "") {
		if (is_separator(line)) {
			start_table(pending)
			pending = ""
			return
		}
		flush_pending()
	}
	if (line ~ /^[ \t]*\|/) {
		pending = line
		return
	}
	print line
}

function flush_pending() {
	if (pending != "")
		print pending
	pending = ""
}

function include_file(path, from,    line, on, title_seen) {
	on = 0
	while ((getline line < path) > 0) {
		if (line ~ /^## /) {
			if (!on && (from == "" || substr(line, 4) == from))
				on = 1
			if (on) {
				flush_pending()
				ncols = 0
				print ""
				print "# " upcase_heading(substr(line, 4))
				continue
			}
		}
		if (!on)
			continue
		if (line ~ /^### /) {
			print "## " substr(line, 5)
			continue
		}
		put(line)
	}
	close(path)
	flush_pending()
	if (!on) {
		print "md2man.awk: nothing included from " path " (from \"" from "\")" > "/dev/stderr"
		exit 1
	}
}

# A bullet list of the **pgcrew** rows of a settings table.
function list_extensions(path,    line, n, cells, count) {
	count = 0
	while ((getline line < path) > 0) {
		if (line !~ /^\| `[a-z_0-9]+` \|/)
			continue
		n = split_row(line, cells)
		if (n == 5 && cells[5] ~ /^\*\*pgcrew\*\* /) {
			sub(/^\*\*pgcrew\*\* /, "", cells[5])
			print "    * **" unquote(cells[1]) "**: " cells[5]
			count++
		}
	}
	close(path)
	if (count == 0) {
		print "md2man.awk: no pgcrew extensions found in " path > "/dev/stderr"
		exit 1
	}
}

{
	gsub(/@VERSION@/, version)
	if ($0 ~ /^<!-- include [^ ]+ (from ".*" )?-->$/) {
		path = $3
		from = ""
		if ($4 == "from") {
			from = $0
			sub(/^[^"]*"/, "", from)
			sub(/".*$/, "", from)
		}
		include_file(docdir "/" path, from)
		next
	}
	if ($0 ~ /^<!-- extensions [^ ]+ -->$/) {
		list_extensions(docdir "/" $3)
		next
	}
	put($0)
}

END { flush_pending() }
