for(const t of document.querySelectorAll('table.sortable')){
const h=t.tHead;if(!h)continue;
[...h.rows[0].cells].forEach((th,i)=>{th.title='sort';th.addEventListener('click',()=>{
const b=t.tBodies[0],d=th.dataset.dir==='a'?'d':'a';th.dataset.dir=d;
const k=r=>{const c=r.cells[i];if(!c)return'';const v=c.getAttribute('data-v');return v===null?c.textContent.trim():parseFloat(v)};
[...b.rows].sort((x,y)=>{const p=k(x),q=k(y);
const o=typeof p==='number'&&typeof q==='number'?p-q:String(p).localeCompare(String(q),undefined,{numeric:true});
return d==='a'?o:-o}).forEach(r=>b.appendChild(r))})})}
