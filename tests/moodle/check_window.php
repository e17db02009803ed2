<?php
// Grade worked's Moodle XML and GIFT exports with a real Moodle's own importer and question engine.
//
// Run it through the driver (it builds the quizzes, writes the plan, runs this as the site's user, compares):
//     WORKED_MOODLE=/tmp/moodle .venv/bin/python tests/moodle/run_check.py
//     WORKED_MOODLE=/tmp/moodle .venv/bin/python -m pytest -q tests/test_lms_moodle.py
// or by hand:
//     php tests/moodle/check_window.php --moodle=/tmp/moodle --plan=PLAN.json --out=RESULT.json [--keep]
//
// PLAN.json: {"imports": [{"label", "format": "xml"|"gift", "file", "checks": [{"idnumber", "sub", "answer",
// "expect", ...} or {"idnumber", "choice", "expect", ...}]}]}. "sub" is 0 for a numerical question, else the
// 1-based place of a Cloze (multianswer) sub-question; "choice" is the text of a multichoice option to choose. Each import goes into a fresh course (deleted at the end unless --keep, and at the start of
// the next run) through qformat_xml / qformat_gift (question/format.php: importpreprocess, importprocess,
// importpostprocess) with the category and context read from the file, as the import page does. Then every
// check is one attempt of the Moodle question engine (question_bank::load_question,
// make_questions_usage_by_activity, start_question, process_action, finish_question, get_question_fraction),
// deferred feedback: a numerical question gets the answer; a Cloze question gets it in that sub-question only
// (the others left blank, which Moodle does not grade), and the sub-question's own fraction is the question's
// fraction times its total weight over the sub-question's weight; a multichoice question gets the option whose
// text is "choice", found among the options in the order Moodle shuffled them, and the result has the feedback
// Moodle's renderer shows for it (the rendered question's "specificfeedback"), the options' texts in that order,
// whether the question shuffles them and its right answer. RESULT.json has, per import: the questions
// imported (id, idnumber, type, mark, category path as stored), each check with Moodle's fraction and whether it
// matches "expect", and the idnumbers checked but not imported, or imported but not checked.
//
// Needs a Moodle 4.5 site (config.php in --moodle) and PHP's CLI; tests/moodle/README.md has the setup.

define('CLI_SCRIPT', true);

$opts = getopt('', ['moodle:', 'plan:', 'out:', 'keep']);
foreach (['moodle', 'plan', 'out'] as $need) {
    if (empty($opts[$need])) {
        fwrite(STDERR, "error: --$need is required (php check_window.php --moodle=DIR --plan=PLAN.json --out=RESULT.json)\n");
        exit(2);
    }
}
if (!is_readable($opts['moodle'] . '/config.php')) {
    fwrite(STDERR, "error: --moodle: no config.php in {$opts['moodle']} (install Moodle there first)\n");
    exit(2);
}
$plan = json_decode(file_get_contents($opts['plan']), true);
if (!is_array($plan) || !isset($plan['imports'])) {
    fwrite(STDERR, "error: --plan: {$opts['plan']} is not a plan (expected JSON with \"imports\")\n");
    exit(2);
}

require($opts['moodle'] . '/config.php');
require_once($CFG->dirroot . '/course/lib.php');
require_once($CFG->libdir . '/questionlib.php');
require_once($CFG->dirroot . '/question/format.php');
require_once($CFG->dirroot . '/question/format/xml/format.php');
require_once($CFG->dirroot . '/question/format/gift/format.php');
require_once($CFG->dirroot . '/question/engine/lib.php');

\core\session\manager::set_user(get_admin());
$PAGE->set_url('/question/preview.php');   // the renderer of a choice question's feedback needs a page
$PAGE->set_context(context_system::instance());

/** The category path of a question category as stored, top first (names exactly as in the database). */
function category_path(int $categoryid): array {
    global $DB;
    $names = [];
    while ($categoryid) {
        $c = $DB->get_record('question_categories', ['id' => $categoryid], 'id, name, parent', MUST_EXIST);
        array_unshift($names, $c->name);
        $categoryid = (int) $c->parent;
    }
    return $names;
}

/** Import one file into a fresh course's question bank; returns [course, ok, import output, question rows]. */
function import_file(array $imp, int $n): array {
    global $DB;
    $course = create_course((object) [
        'fullname' => "worked window check $n: {$imp['label']}",
        'shortname' => 'worked-check-' . $n . '-' . random_string(8),
        'category' => $DB->get_field_select('course_categories', 'MIN(id)', '1 = 1'),
    ]);
    $context = context_course::instance($course->id);
    $contexts = new core_question\local\bank\question_edit_contexts($context);
    $category = question_make_default_categories([$context]);
    $class = 'qformat_' . $imp['format'];
    $qformat = new $class();
    $qformat->setCategory($category);
    $qformat->setContexts($contexts->having_one_edit_tab_cap('import'));
    $qformat->setCourse($course);
    $qformat->setFilename($imp['file']);
    $qformat->setRealfilename(basename($imp['file']));
    $qformat->setMatchgrades('error');
    $qformat->setCatfromfile(true);
    $qformat->setContextfromfile(true);
    $qformat->setStoponerror(true);
    $qformat->set_display_progress(false);
    ob_start();
    $ok = false;
    try {
        $ok = $qformat->importpreprocess() && $qformat->importprocess() && $qformat->importpostprocess();
    } catch (Throwable $e) {
        echo get_class($e) . ': ' . $e->getMessage() . (isset($e->debuginfo) ? " ({$e->debuginfo})" : '');
        if ($DB->is_transaction_started()) {
            $DB->force_transaction_rollback();   // as the failed page would: nothing of this file stays
        }
    }
    $output = trim(html_to_text(ob_get_clean(), 0, false));
    $rows = [];
    foreach ($qformat->questionids as $id) {
        $r = $DB->get_record_sql(
            "SELECT q.id, q.qtype, q.defaultmark, qbe.idnumber, qbe.questioncategoryid
               FROM {question} q
               JOIN {question_versions} qv ON qv.questionid = q.id
               JOIN {question_bank_entries} qbe ON qbe.id = qv.questionbankentryid
              WHERE q.id = ?", [$id], MUST_EXIST);
        $rows[] = ['id' => (int) $r->id, 'qtype' => $r->qtype, 'idnumber' => $r->idnumber,
                   'defaultmark' => (float) $r->defaultmark, 'category' => category_path((int) $r->questioncategoryid)];
    }
    return [$course, $ok, $output, $rows];
}

/** One attempt through the question engine: Moodle's fraction for *answer* (in sub-question *sub*). */
function grade(int $questionid, int $sub, string $answer, context $context): array {
    $question = question_bank::load_question($questionid);
    $quba = question_engine::make_questions_usage_by_activity('core_question_preview', $context);
    $quba->set_preferred_behaviour('deferredfeedback');
    $slot = $quba->add_question($question, $question->defaultmark);
    $quba->start_question($slot);
    $weight = 1.0;
    $total = 1.0;
    $right = null;
    if ($sub === 0) {
        if ($question->qtype->name() !== 'numerical') {
            throw new coding_exception("question $questionid is {$question->qtype->name()}, not numerical");
        }
        $data = ['answer' => $answer];
        $right = $question->get_correct_response()['answer'] ?? null;
    } else {
        if ($question->qtype->name() !== 'multianswer') {
            throw new coding_exception("question $questionid is {$question->qtype->name()}, not Cloze");
        }
        $keys = array_keys($question->subquestions);
        if (!isset($keys[$sub - 1])) {
            throw new coding_exception("question $questionid has no sub-question $sub");
        }
        $data = [];
        $total = 0.0;
        foreach ($question->subquestions as $i => $subq) {
            if ($subq->qtype->name() !== 'numerical') {
                throw new coding_exception("question $questionid: sub-question $i is {$subq->qtype->name()}");
            }
            $data["sub{$i}_answer"] = '';
            $total += $subq->defaultmark;
        }
        $i = $keys[$sub - 1];
        $data["sub{$i}_answer"] = $answer;
        $weight = (float) $question->subquestions[$i]->defaultmark;
        $right = $question->subquestions[$i]->get_correct_response()['answer'] ?? null;
    }
    $quba->process_action($slot, $data);
    $quba->finish_question($slot);
    $fraction = $quba->get_question_fraction($slot);
    return ['fraction' => $fraction, 'subfraction' => $fraction === null ? null : $fraction * $total / $weight,
            'state' => (string) $quba->get_question_state($slot), 'rightanswer' => $right];
}

/** The text of the elements of class *cls* in *html*, as a reader sees it (tags gone, spaces collapsed). */
function texts_of_class(string $html, string $cls): array {
    $doc = new DOMDocument();
    libxml_use_internal_errors(true);
    $doc->loadHTML('<?xml encoding="UTF-8"><div>' . $html . '</div>');
    libxml_clear_errors();
    $xpath = new DOMXPath($doc);
    $out = [];
    foreach ($xpath->query("//*[contains(concat(' ', normalize-space(@class), ' '), ' $cls ')]") as $node) {
        $out[] = trim(preg_replace('/\s+/u', ' ', $node->textContent));
    }
    return $out;
}

/** One attempt at a single-answer multichoice question: choose the option whose text is *choice* (Moodle
 * shuffled the options: found by its text through the question's own un_summarise_response, which reads each
 * option's text as html_to_text does), and return Moodle's fraction and the feedback its renderer shows. */
function grade_choice(int $questionid, string $choice, context $context): array {
    $question = question_bank::load_question($questionid);
    if ($question->qtype->name() !== 'multichoice' || !($question instanceof qtype_multichoice_single_question)) {
        throw new coding_exception("question $questionid is {$question->qtype->name()}, not a single-answer multichoice");
    }
    $quba = question_engine::make_questions_usage_by_activity('core_question_preview', $context);
    $quba->set_preferred_behaviour('deferredfeedback');
    $slot = $quba->add_question($question, $question->defaultmark);
    $quba->start_question($slot);
    $qa = $quba->get_question_attempt($slot);
    $order = $question->get_order($qa);
    $texts = [];
    foreach ($order as $place => $ansid) {
        $a = $question->answers[$ansid];
        $texts[] = trim($question->html_to_text($a->answer, $a->answerformat));
    }
    $matches = array_keys($texts, $choice, true);
    $base = ['options' => $texts, 'shuffle' => (bool) $question->shuffleanswers,
             'rightanswer' => $quba->get_right_answer_summary($slot)];
    if (count($matches) !== 1) {
        return $base + ['fraction' => null, 'subfraction' => null, 'state' => count($matches) . ' options with that text',
                        'place' => null, 'feedback' => null, 'chosen' => null];
    }
    $response = $question->un_summarise_response($choice);
    $quba->process_action($slot, $response);
    $quba->finish_question($slot);
    $fraction = $quba->get_question_fraction($slot);
    $options = new question_display_options();
    $options->feedback = question_display_options::VISIBLE;
    $options->correctness = question_display_options::VISIBLE;
    $options->generalfeedback = question_display_options::HIDDEN;
    $options->rightanswer = question_display_options::HIDDEN;
    $html = $quba->render_question($slot, $options);
    $feedback = texts_of_class($html, 'specificfeedback');
    return $base + ['fraction' => $fraction, 'subfraction' => $fraction, 'state' => (string) $quba->get_question_state($slot),
                    'place' => $response['answer'] ?? null, 'chosen' => $quba->get_response_summary($slot),
                    'feedback' => implode(' | ', $feedback)];
}

/** Delete the courses of this script's earlier runs (kept with --keep, or left by a run that stopped). */
function delete_old_courses(): void {
    global $DB;
    ob_start();
    foreach ($DB->get_records_select('course', $DB->sql_like('shortname', '?'), ['worked-check-%']) as $course) {
        delete_course($course, false);
    }
    ob_end_clean();
}

delete_old_courses();
$result = ['moodle' => $CFG->release, 'dbtype' => $CFG->dbtype, 'imports' => []];
$courses = [];
foreach ($plan['imports'] as $n => $imp) {
    [$course, $ok, $output, $rows] = import_file($imp, $n);
    $courses[] = $course;
    $context = context_course::instance($course->id);
    $byid = [];
    foreach ($rows as $r) {
        $byid[(string) $r['idnumber']] = $r;
    }
    $checked = [];
    $results = [];
    foreach ($imp['checks'] as $c) {
        $checked[$c['idnumber']] = true;
        if (!isset($byid[$c['idnumber']])) {
            continue;
        }
        $g = isset($c['choice'])
            ? grade_choice($byid[$c['idnumber']]['id'], (string) $c['choice'], $context)
            : grade($byid[$c['idnumber']]['id'], (int) $c['sub'], (string) $c['answer'], $context);
        $g['match'] = $g['subfraction'] !== null && abs($g['subfraction'] - $c['expect']) < 1e-9;
        $results[] = $c + $g;
    }
    $result['imports'][] = [
        'label' => $imp['label'], 'format' => $imp['format'], 'ok' => (bool) $ok, 'output' => $output,
        'questions' => $rows, 'results' => $results,
        'missing' => array_values(array_diff(array_keys($checked), array_keys($byid))),
        'unchecked' => array_values(array_diff(array_keys($byid), array_keys($checked))),
    ];
}
file_put_contents($opts['out'], json_encode($result, JSON_PRETTY_PRINT | JSON_UNESCAPED_UNICODE | JSON_UNESCAPED_SLASHES));
if (!isset($opts['keep'])) {
    ob_start();
    foreach ($courses as $course) {
        delete_course($course, false);
    }
    ob_end_clean();
}
