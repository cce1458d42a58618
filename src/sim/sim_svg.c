/* `provreqd simulate --plot`: the run as one SVG picture. Plain SVG text,
 * written here rather than through a plotting library: two panels on one
 * time axis (node-group sizes as step lines; one bar per request coloured
 * by state) need a few dozen elements, and the project links no graphics
 * library. */
#include "sim/sim.h"

#include "util/clock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define W 1000
#define ML 190   /* left margin: request names */
#define MR 24
#define TOP 56   /* title */
#define GH 200   /* node-group panel height */
#define ROW 22
#define BAR 14

static const char *const state_colours[SIM_NSTATES] = { "#9e9e9e", "#f0a030", "#2e9e44", "#d62728", "#7b61c4" };
static const char *const group_colours[] = { "#1f77b4", "#e377c2", "#17becf", "#8c564b", "#bcbd22", "#7f7f7f" };
#define NGC (sizeof(group_colours) / sizeof(group_colours[0]))

static void xml_text(buf *b, const char *s)
{
	for(; *s; s++) {
		switch(*s) {
		case '<': buf_append_str(b, "&lt;"); break;
		case '>': buf_append_str(b, "&gt;"); break;
		case '&': buf_append_str(b, "&amp;"); break;
		case '"': buf_append_str(b, "&quot;"); break;
		default: buf_append_char(b, *s);
		}
	}
}

/* Room for a label, in characters of the 12 px font (about 7 px each). */
#define LABEL_CHARS ((ML - 12) / 7)
#define LEGEND_CHARS 21

/* Append `s` escaped, shortened to at most `max` characters (bytes; names
 * here are DNS labels, ASCII) by cutting its middle: the start and the end
 * of a name tell names apart best (team-a/train-…-0017). The full text goes
 * to a <title> child, the tooltip, when it was cut. */
static void short_text(buf *b, const char *s, size_t max)
{
	size_t n = strlen(s), head;
	char *cut;

	if(n <= max) {
		xml_text(b, s);
		return;
	}
	head = (max - 1) / 2;
	cut = malloc(max + 3);
	if(!cut) {
		xml_text(b, s);
		return;
	}
	memcpy(cut, s, head);
	memcpy(cut + head, "\xe2\x80\xa6", 3); /* … */
	memcpy(cut + head + 3, s + n - (max - 1 - head), max - 1 - head);
	cut[max + 2] = '\0';
	xml_text(b, cut);
	free(cut);
	buf_append_str(b, "<title>");
	xml_text(b, s);
	buf_append_str(b, "</title>");
}

static double xpos(const sim_record *r, int64_t t)
{
	double span = (double)(r->end > r->start ? r->end - r->start : 1);
	if(t < r->start)
		t = r->start;
	if(t > r->end)
		t = r->end;
	return ML + (double)(t - r->start) / span * (W - ML - MR);
}

/* A tick step giving at most 12 ticks over the run. */
static int64_t tick_step(int64_t span)
{
	static const int64_t steps[] = { 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200,
					 10800, 21600, 43200, 86400, 172800, 604800 };
	size_t i;
	for(i = 0; i < sizeof(steps) / sizeof(steps[0]); i++)
		if(span / (steps[i] * PRD_NS_PER_SEC) <= 12)
			return steps[i] * PRD_NS_PER_SEC;
	return 604800 * PRD_NS_PER_SEC;
}

static int32_t group_max(const sim_record *r)
{
	int32_t m = 1;
	size_t i;
	for(i = 0; i < r->nsmp; i++) {
		if(r->smp[i].target > m)
			m = r->smp[i].target;
		if(r->smp[i].ready > m)
			m = r->smp[i].ready;
	}
	return m;
}

/* One group's target size as a step line, or (`ready`) its Ready nodes as
 * a lightly shaded area under it, so a group whose nodes are not Ready
 * yet shows a gap between line and shade without hiding the line. Groups
 * of the same size would hide one another, so earlier groups are drawn
 * wider underneath later ones (`width`): equal lines show as stripes, and
 * no line is moved off its value. */
static void group_line(buf *b, const sim_record *r, const char *g, bool ready, int32_t ymax, double y0,
		       const char *colour, double width)
{
	bool started = false;
	size_t i;
	for(i = 0; i < r->nsmp; i++) {
		const sim_sample *s = &r->smp[i];
		int32_t v = ready ? s->ready : s->target;
		double y = y0 - (double)v / ymax * (GH - 10);
		if(strcmp(s->group, g))
			continue;
		if(!started && ready)
			buf_printf(b, "<path fill=\"%s\" fill-opacity=\"0.18\" stroke=\"none\" d=\"M%.1f %.1f V%.1f",
				   colour, xpos(r, s->t), y0, y);
		else if(!started)
			buf_printf(b, "<path fill=\"none\" stroke=\"%s\" stroke-width=\"%.1f\" d=\"M%.1f %.1f", colour,
				   width, xpos(r, s->t), y);
		else
			buf_printf(b, " H%.1f V%.1f", xpos(r, s->t), y);
		started = true;
	}
	if(started && ready) /* the area closes down on the baseline */
		buf_printf(b, " H%.1f V%.1f Z\"/>\n", xpos(r, r->end), y0);
	else if(started)
		buf_printf(b, " H%.1f\"/>\n", xpos(r, r->end));
}

/* A state segment's tooltip: the request's full name, the state and when,
 * and the reason and message of the condition that put it there (or the
 * latest one within the stretch: why a Pending request is still waiting). */
static void span_title(const sim_record *r, const char *full, const sim_span *sp, buf *b)
{
	char from[32], to[32];

	sim_offset_str(r->start, sp->from, from, sizeof(from));
	sim_offset_str(r->start, sp->to, to, sizeof(to));
	buf_append_str(b, "<title>");
	xml_text(b, full);
	buf_printf(b, "\n%s from %s to %s", sim_state_name(sp->state), from, to);
	if(sp->reason && *sp->reason) {
		buf_append_char(b, '\n');
		if(sp->type)
			buf_printf(b, "%s: ", sp->type);
		xml_text(b, sp->reason);
		if(sp->message && *sp->message) {
			buf_append_str(b, ": ");
			xml_text(b, sp->message);
		}
	}
	buf_append_str(b, "</title>");
}

/* The request panel: one bar per request, one segment per state. */
static int svg_requests(const sim_record *r, buf *b, double ry)
{
	size_t i, k;
	buf_printf(b, "<text x=\"%d\" y=\"%.1f\" font-weight=\"bold\">requests</text>\n", 10, ry - 8);
	for(i = 0; i < r->nreq; i++) {
		double y = ry + (double)i * ROW;
		sim_span *sp = NULL;
		size_t n = 0;
		int pass;
		char full[512];
		snprintf(full, sizeof(full), "%s/%s", r->req[i].ns, r->req[i].name);
		buf_printf(b, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">", ML - 6, y + BAR - 3);
		short_text(b, full, LABEL_CHARS);
		buf_append_str(b, "</text>\n");
		if(sim_record_spans(r, i, &sp, &n))
			return PRD_ENOMEM;
		/* Stretches too short to see at this scale (a one-second
		 * ScaleUpInProgress in an hour) are drawn last, 3 px wide, so the
		 * next state does not cover them. */
		for(pass = 0; pass < 2; pass++)
			for(k = 0; k < n; k++) {
				double x0 = xpos(r, sp[k].from), x1 = xpos(r, sp[k].to);
				bool tiny = x1 - x0 < 3;
				if(tiny != (pass == 1))
					continue;
				buf_printf(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%d\" fill=\"%s\">",
					   x0, y, tiny ? 3 : x1 - x0, BAR, state_colours[sp[k].state]);
				span_title(r, full, &sp[k], b);
				buf_append_str(b, "</rect>\n");
			}
		free(sp);
	}
	return 0;
}

/* The legend: request states on one line, then the groups five a line. */
static void svg_legend(const sim_record *r, buf *b, double legend)
{
	size_t i, k;
	for(k = 0; k < SIM_NSTATES; k++) {
		double x = 10 + (double)k * 170;
		buf_printf(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"12\" fill=\"%s\"/>"
			      "<text x=\"%.1f\" y=\"%.1f\">%s</text>\n",
			   x, legend - 10, state_colours[k], x + 20, legend, k == SIM_PENDING ? "Pending/Accepted" :
			   sim_state_name((int)k));
	}
	for(i = 0; i < r->ngroups; i++) {
		double x = 10 + (double)(i % 5) * 170, y = legend + 22 + (double)(i / 5) * 18;
		buf_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"3\"/>"
			      "<text x=\"%.1f\" y=\"%.1f\">",
			   x, y - 4, x + 14, y - 4, group_colours[i % NGC], x + 20, y);
		short_text(b, r->groups[i], LEGEND_CHARS);
		buf_append_str(b, "</text>\n");
	}
	buf_printf(b, "<text x=\"10\" y=\"%.1f\" fill=\"#444\">node groups: the line is the target size, the "
		      "shade under it the Ready nodes</text>\n",
		   legend + 40 + 18 * (double)((r->ngroups - 1) / 5));
}

int sim_svg(const sim_record *r, buf *b)
{
	int32_t ymax = group_max(r), v, ystep;
	int64_t step = tick_step(r->end - r->start), t;
	double gy0 = TOP + GH;                    /* the group panel's baseline */
	double ry = gy0 + 40;                     /* first request row */
	double axis = ry + (double)r->nreq * ROW + 6;
	double legend = axis + 40;
	int height = (int)legend + 50 + 18 * (int)((r->ngroups + 4) / 5);
	char ts[64], te[64], off[32];
	size_t i;

	sim_time_str(r->start, ts, sizeof(ts));
	sim_time_str(r->end, te, sizeof(te));
	buf_printf(b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
		      "font-family=\"DejaVu Sans, Verdana, sans-serif\" font-size=\"12\">\n"
		      "<rect width=\"100%%\" height=\"100%%\" fill=\"#ffffff\"/>\n",
		   W, height, W, height);
	buf_printf(b, "<text x=\"%d\" y=\"22\" font-size=\"15\" font-weight=\"bold\">provreqd simulate</text>\n"
		      "<text x=\"%d\" y=\"40\" fill=\"#444\">simulated time from %s to %s</text>\n",
		   ML, ML, ts, te);

	/* Time grid and labels, across both panels. */
	for(t = 0; r->start + t <= r->end; t += step) {
		double x = xpos(r, r->start + t);
		sim_offset_str(r->start, r->start + t, off, sizeof(off));
		buf_printf(b, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e4e4e4\"/>\n", x, TOP, x, axis);
		buf_printf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"#444\">%s</text>\n", x,
			   axis + 16, off);
		buf_printf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"#444\">%s</text>\n", x,
			   gy0 + 16, off);
	}
	buf_printf(b, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\" fill=\"#444\">since start</text>\n", ML - 14,
		   axis + 16);

	/* Node-group panel: y axis in nodes. */
	ystep = ymax <= 10 ? 1 : ymax <= 20 ? 2 : ymax <= 50 ? 5 : ymax / 10;
	buf_printf(b, "<text x=\"%d\" y=\"%d\" font-weight=\"bold\">nodes per group</text>\n", 10, TOP + 12);
	for(v = 0; v <= ymax; v += ystep) {
		double y = gy0 - (double)v / ymax * (GH - 10);
		buf_printf(b, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#eeeeee\"/>\n", ML, y, W - MR, y);
		buf_printf(b, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\" fill=\"#444\">%d</text>\n", ML - 6, y + 4, v);
	}
	buf_printf(b, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#444\"/>\n", ML, gy0, W - MR, gy0);
	buf_printf(b, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%.1f\" stroke=\"#444\"/>\n", ML, TOP, ML, gy0);
	for(i = 0; i < r->ngroups; i++)
		group_line(b, r, r->groups[i], true, ymax, gy0, group_colours[i % NGC], 0);
	for(i = 0; i < r->ngroups; i++) {
		double width = 2.0 + 2.0 * (double)(r->ngroups - 1 - i);
		group_line(b, r, r->groups[i], false, ymax, gy0, group_colours[i % NGC], width > 8 ? 8 : width);
	}

	if(svg_requests(r, b, ry))
		return PRD_ENOMEM;
	buf_printf(b, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#444\"/>\n", ML, axis, W - MR, axis);

	svg_legend(r, b, legend);
	buf_append_str(b, "</svg>\n");
	return b->failed;
}
